package gate

import (
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// verdictInput is an input with tainted justification entries "e1" (its
// untrusted root reported) and "e3" (none reported), an argument "to" from
// "e2", a plan and an approval "a1", for the findings.
var verdictInput = ast.MustParseTerm(`{
	"action": {"tool": "send", "principal": "tool:web", "principal_tier": "external"},
	"justification": [{"id": "e1", "principal": "agent:a", "effective_tier": "external", "reach_tier": "external",
		"untrusted": [{"id": "r1", "principal": "tool:web", "tier": "external"}]},
		{"id": "e3", "principal": "agent:a", "effective_tier": "unverified", "reach_tier": "unverified", "untrusted": []}],
	"arguments": {"to": {"explicit": true, "sources": [{"id": "e2", "principal": "user:u", "effective_tier": "user", "reach_tier": "user", "untrusted": []}]}},
	"approvals": [{"id": "a1", "approver": "user:u"}],
	"plan": {"cited": true, "id": "p1", "step": 2, "authority": false, "why": "another tool"}
}`).Value

// TestParseVerdictFailsClosed: every decision object that is not exactly
// the documented shape, and every finding the gate cannot write a reason
// for, is an error, which the gate turns into a deny.
func TestParseVerdictFailsClosed(t *testing.T) {
	for name, c := range map[string]struct {
		v    string
		want string
	}{
		"not an object":        {`"allow"`, "not an object"},
		"unknown field":        {`{"decision": "allow", "reasons": [], "allow": true}`, `unknown field "allow"`},
		"decision not string":  {`{"decision": true, "reasons": []}`, "decision is a boolean"},
		"reasons not array":    {`{"decision": "allow", "reasons": "ok"}`, "reasons is a string"},
		"reason not string":    {`{"decision": "allow", "reasons": [1]}`, "reasons[0] is a number"},
		"no reasons":           {`{"decision": "allow"}`, "no reasons or findings"},
		"null reasons":         {`{"decision": "allow", "reasons": null}`, "no reasons or findings"},
		"warnings not array":   {`{"decision": "allow", "reasons": [], "warnings": {}}`, "warnings is a object"},
		"approval not string":  {`{"decision": "allow", "reasons": [], "approval": []}`, "approval is a array"},
		"findings not a set":   {`{"decision": "deny", "findings": "x"}`, "findings is a string"},
		"finding not object":   {`{"decision": "deny", "findings": ["x"]}`, "a finding is a string"},
		"finding without rule": {`{"decision": "deny", "findings": [{"arg": "to"}]}`, "no field rule"},
		"unknown rule":         {`{"decision": "deny", "findings": [{"rule": "mystery"}]}`, `unknown rule "mystery"`},
		"unknown field of a finding": {`{"decision": "deny", "findings": [{"rule": "trusted", "colour": "red"}]}`,
			"unknown field"},
		"entry not in the input": {`{"decision": "deny", "findings": [{"rule": "tainted-justification", "entry": "zz"}]}`,
			"entry zz is not in the input"},
		"argument rule without arg": {`{"decision": "deny", "findings": [{"rule": "unsourced-argument"}]}`, "no field arg"},
		"approval not in the input": {`{"decision": "allow", "findings": [{"rule": "approved", "approval": "a2"}]}`,
			"approval a2 is not in the input"},
		"an approval overrides a headline": {`{"decision": "allow", "findings": [{"rule": "overridden", "by": {"rule": "trusted"}}]}`,
			"cannot override rule trusted"},
		"extension without its text": {`{"decision": "deny", "findings": [{"rule": "extension"}]}`, "no field reason"},
		"steered without sources":    {`{"decision": "ask", "findings": [{"rule": "steered", "outcome": "ask"}]}`, "sources: missing"},
	} {
		v := ast.MustParseTerm(c.v).Value
		if _, err := parseVerdict(v, verdictInput); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", name, err, c.want)
		}
	}
	got, err := parseVerdict(ast.MustParseTerm(`{"decision": "deny", "reasons": ["r"], "warnings": null, "approval": "a"}`).Value, verdictInput)
	if err != nil || got.Decision != "deny" || len(got.Reasons) != 1 || got.Reasons[0] != "r" || got.Warnings != nil || got.Approval != "a" {
		t.Fatalf("got %+v, %v", got, err)
	}
}

// TestFindingsAreWrittenAsReasons: what a person reads for each finding of
// the default policy, in order (the rule that settled the decision, the
// rules that blocked it, the tainted control, the plan, what an approval
// overrode; sorted within each), each reason once.
func TestFindingsAreWrittenAsReasons(t *testing.T) {
	v := ast.MustParseTerm(`{"decision": "deny", "reasons": ["own reason first"], "findings": {
		{"rule": "plan-unused"},
		{"rule": "tainted-justification", "entry": "e1"},
		{"rule": "tainted-justification", "entry": "e3"},
		{"rule": "unsourced-argument", "arg": "to"},
		{"rule": "untrusted-argument", "arg": "to", "entry": "e1"},
		{"rule": "empty-sources", "arg": "cc"},
		{"rule": "extension", "reason": "amount 9 is above the limit 5"},
		{"rule": "untrusted-proposer"},
		{"rule": "overridden", "by": {"rule": "weak-justification", "entry": "e2"}},
		{"rule": "overridden", "by": {"rule": "weak-argument", "arg": "to", "entry": "e2"}},
		{"rule": "steered", "outcome": "ask", "sources": {{"arg": "to", "entry": "e2"}, {"arg": "cc", "entry": "e2"}}},
		{"rule": "approved", "approval": "a1"},
		{"rule": "plan-used"},
		{"rule": "no-protected-argument"},
		{"rule": "unsourced-data", "arg": "to"}
	}}`).Value
	got, err := parseVerdict(v, verdictInput)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"own reason first",
		"approved once by user:u (approval a1)",
		"steered: the justification is tainted, but every protected argument comes from trusted entries (cc <- e2 (user:u), to <- e2 (user:u)); the catalog's outcome for send is ask",
		"untrusted-proposer: the call is proposed by external principal tool:web: an untrusted principal may not propose calls",
		"amount 9 is above the limit 5",
		"empty-sources: protected argument cc has an empty source list: the agent composed it in a tainted context",
		"no-protected-argument: the call has no protected argument: nothing vouches for it but the tainted justification",
		"unsourced-argument: protected argument to has no provenance of its own: it comes from the tainted justification",
		"unsourced-data: protected argument to fills a data slot of the plan but names no source",
		"untrusted-argument: argument to comes from e1 (agent:a), which descends from external principal tool:web",
		"tainted-justification: justification e1 descends from external principal tool:web",
		"tainted-justification: justification e3 has effective tier unverified",
		"plan p1 step 2 gives no authority: another tool",
		"plan p1 step 2 is the control justification: the call matches it",
		"overridden by the approval: weak-argument: argument to comes from e2, which has an untrusted ancestor through a weak edge only",
		"overridden by the approval: weak-justification: justification e2 has an untrusted ancestor through a weak edge only (reach tier user)",
	}
	if strings.Join(got.Reasons, "\n") != strings.Join(want, "\n") {
		t.Fatalf("reasons:\n%s\nwant:\n%s", strings.Join(got.Reasons, "\n"), strings.Join(want, "\n"))
	}
}
