// Package trajectory reads the structure of a session's tool calls, never
// their content, and raises soft alerts.
//
// Calls are mapped to roles by the tool catalog (recall, list, save, draft,
// send, rag, other) and folded into a State whose features are updated in
// O(1) per call: counts per role, length, send without recall, recall before
// send (any recall before any send), the recall/send ratio, the longest run
// of recalls, five bigrams, the first role, and whether a send went to an
// external recipient or to one that descends from untrusted content.
//
// What a send's recipients are is the catalog's to say (gate.Catalog reads
// the recipient argument in every shape harnesses log it); a Call carries
// only whether they were known and whether any was external. A send whose
// recipients are unknown gets the bare structural rule, any recall before
// any send, under its own name: the detector must not fall silent when the
// harness logs no arguments.
//
// Invariant rules need no training; a logistic-regression Model can be
// trained on labelled sessions and loaded by the gate. Generate makes
// synthetic sessions to exercise the pipeline; a model fitted to them is a
// demonstration, not a detector. Alerts are evidence: the default policy
// reports them as warnings and never denies or asks on them alone. On benign
// traffic such detectors mostly reduce to "recall before send" (see
// docs/performance.md), which is why; the optional module policies/trajectory
// asks a human before an external send after recalls, for operators who
// want that.
package trajectory
