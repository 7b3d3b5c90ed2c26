// Package gate decides whether a proposed tool call may run: allow, deny, or
// ask a human.
//
// The gate is a pure evaluator: it stores nothing and reads no store. The
// engine verifies the signed call entry (its parents are the call's
// justification), reads the facts in one read transaction (Facts: each
// entry the call names with its tiers and the untrusted roots it descends
// from; where each argument came from; the session's trajectory; the
// approvals that match, each checked against its signed entry), and asks
// Decide, which builds the policy input (each root's ID, principal, tier,
// whether it is reached by strong edges, and how many hops away it is; the
// path itself is in the decision; the tool's catalog entry; the trajectory
// features and alerts) and evaluates a Rego policy compiled once. The engine
// then stores the call entry, the decision, the trajectory step and the use
// of an approval in one durable commit.
//
// The default policy decides and names what it decided on: each rule that
// fires yields a finding ({rule, arg, entry}), and the gate writes the
// reasons people read from the findings and the input (reason.go), so that
// the policy does no string work on a check. A finding the gate cannot write
// (an unknown rule, an entry not in the input) is a malformed decision: a
// deny. A replacement policy may return reasons as strings instead.
//
// A call's justification is its control (what decided that it happens) and
// each argument's sources are its data: the default policy denies a
// protected argument from untrusted content, and asks when only the control
// is tainted and every protected argument names trusted sources. A call that
// cites a plan step it matches, of a plan made from trusted entries, has the
// plan as its control (PlanUse; the engine reads the plan into Facts). A
// plan step may delegate a protected argument to the output of an earlier
// step or to an entry (lineage.Delegation): the gate tells the policy which
// of the argument's sources are that source, and the policy asks a person
// to confirm the value (the catalog's on_delegated) instead of denying. A
// person answers a deny or an ask with a signed approval or rejection
// (Review); Pending is what waits for one.
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
// so Reevaluate gives the same answer from the logged input.
package gate
