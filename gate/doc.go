// Package gate decides whether a proposed tool call may run: allow, deny, or
// ask a human.
//
// A check verifies the signed call entry (its parents are the call's
// justification), builds the policy input from lineage (each justification
// entry with its tiers and the untrusted roots it descends from (each root's
// ID, principal, tier, whether it is reached by strong edges, and how many
// hops away it is; the path itself is in the decision); where each
// argument came from; the tool's catalog entry; the session's trajectory
// features and alerts; approvals that match), and evaluates a Rego policy
// compiled once. The call entry, the decision, the trajectory step and the
// use of an approval are then stored in one durable commit.
//
// The gate fails closed. OPA's default mode turns a failing builtin into an
// undefined expression, so `allow if not tainted` would allow; the gate runs
// with strict builtin errors, without network builtins, and treats an
// evaluation error, an undefined or malformed decision, a timeout and an
// unknown or unverifiable justification as deny, with the cause in the
// reasons. A policy that does not compile, or whose decision has the wrong
// shape on a probe, stops the gate from starting.
//
// Every decision is logged with its input and a digest of the policy, its
// data and the catalog, and evaluated at the engine's clock (rego.EvalTime),
// so Reevaluate gives the same answer from the log.
package gate
