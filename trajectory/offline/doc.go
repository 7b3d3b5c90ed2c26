// Package offline is the trajectory detector's offline tooling: reading
// labelled sessions, replaying them through the rules, training and
// evaluating the model (held out and cross-validated), and generating
// synthetic sessions for tests and demonstrations. The gate never imports
// it: what runs on every call (features, rules, a trained model's score)
// is in package trajectory.
//
// The generator's sessions are a demonstration, not a measurement of real
// traffic: fit a model on your own labelled sessions (`pedigree trajectory
// train`) before you rely on its alerts.
package offline
