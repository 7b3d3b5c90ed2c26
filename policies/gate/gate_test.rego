package pedigree.gate_test

import rego.v1

import data.pedigree.gate

entry(id, eff, reach) := {
	"id": id, "principal": "p:x", "kind": "memory", "tier": "internal",
	"effective_tier": eff, "reach_tier": reach,
	"untrusted": [{"id": "root", "principal": "tool:mail", "tier": "external", "hops": 1, "strong": true}],
}

prompt := object.union(entry("prompt", "user", "user"), {"principal": "user:alice", "untrusted": []})

mail := object.union(entry("mail", "external", "external"), {"principal": "tool:mail"})

# to is protected, memo may carry untrusted text.
rules := object.union(base.tool, {"args": {"to": {"trusted": true}, "memo": {"trusted": false}}})

base := {
	"action": {"tool": "send_money", "args": {"to": "1", "memo": "m"}, "principal": "agent:a", "principal_tier": "internal", "session": "s"},
	"tool": {"known": true, "sensitive": true, "irreversible": true, "ask_on_untrusted": false, "on_steered": "", "args": {}},
	"justification": [],
	"arguments": {},
	"trajectory": {"features": {}, "alerts": []},
	"approvals": [],
}

# A call justified by [just] whose arguments have the given provenance.
call(tool, just, args) := object.union(base, {"tool": tool, "justification": just, "arguments": args})

explicit(srcs) := {"explicit": true, "sources": srcs}

from_justification(just) := {"explicit": false, "sources": just}

# d has a finding with (at least) the fields of want. The gate writes the
# reasons from the findings (gate/reason.go, tested there).
found(d, want) if {
	some f in d.findings
	object.subset(f, want)
}

test_trusted_justification_allows if {
	d := gate.decision with input as call(base.tool, [prompt], {"to": from_justification([prompt])})
	d.decision == "allow"
	d.findings == {{"rule": "trusted"}}
}

test_untrusted_justification_denies if {
	d := gate.decision with input as call(base.tool, [entry("a", "external", "external")], {"to": from_justification([entry("a", "external", "external")])})
	d.decision == "deny"
	d.findings == {{"rule": "unsourced-argument", "arg": "to"}, {"rule": "tainted-justification", "entry": "a"}}
}

test_unverified_denies if {
	e := entry("a", "unverified", "unverified")
	d := gate.decision with input as call(base.tool, [e], {"to": from_justification([e])})
	d.decision == "deny"
}

test_weak_only_asks if {
	e := entry("a", "user", "external")
	d := gate.decision with input as call(base.tool, [e], {"to": from_justification([e])})
	d.decision == "ask"
	d.findings == {{"rule": "weak-justification", "entry": "a"}}
}

test_weak_argument_asks if {
	w := entry("w", "user", "external")
	d := gate.decision with input as call(rules, [prompt], {"to": explicit([w])})
	d.decision == "ask"
	d.findings == {{"rule": "weak-argument", "arg": "to", "entry": "w"}}
}

test_ask_on_untrusted if {
	tool := object.union(base.tool, {"ask_on_untrusted": true})
	d := gate.decision with input as call(tool, [mail], {"to": from_justification([mail])})
	d.decision == "ask"
}

test_not_sensitive_allows if {
	tool := object.union(base.tool, {"sensitive": false})
	d := gate.decision with input as call(tool, [mail], {"to": from_justification([mail])})
	d.decision == "allow"
	d.findings == {{"rule": "not-sensitive"}}
}

test_missing_sensitive_field_is_sensitive if {
	tool := object.remove(base.tool, ["sensitive"])
	d := gate.decision with input as call(tool, [mail], {"to": from_justification([mail])})
	d.decision == "deny"
}

test_sensitive_field_not_false_is_sensitive if {
	tool := object.union(base.tool, {"sensitive": "no"})
	d := gate.decision with input as call(tool, [mail], {"to": from_justification([mail])})
	d.decision == "deny"
}

# Issue 14 item 23: the per-argument rule alone denies a call justified by
# the user's prompt whose recipient comes from an email.
test_untrusted_argument_denies_with_a_trusted_justification if {
	d := gate.decision with input as call(rules, [prompt], {"to": explicit([mail]), "memo": explicit([prompt])})
	d.decision == "deny"
	d.findings == {{"rule": "untrusted-argument", "arg": "to", "entry": "mail"}}
}

test_untrusted_argument_denies_in_a_tainted_context if {
	d := gate.decision with input as call(rules, [prompt, mail], {"to": explicit([mail]), "memo": explicit([prompt])})
	d.decision == "deny"
	d.findings == {{"rule": "untrusted-argument", "arg": "to", "entry": "mail"}, {"rule": "tainted-justification", "entry": "mail"}}
}

test_unlisted_argument_is_protected if {
	tool := object.union(base.tool, {"args": {"memo": {"trusted": false}}})
	d := gate.decision with input as call(tool, [prompt], {"to": explicit([mail]), "memo": explicit([mail])})
	d.decision == "deny"
	d.findings == {{"rule": "untrusted-argument", "arg": "to", "entry": "mail"}}
}

test_unprotected_argument_may_be_untrusted if {
	d := gate.decision with input as call(rules, [prompt], {"to": explicit([prompt]), "memo": explicit([mail])})
	d.decision == "allow"
}

# Section 1 of issue 17: tainted control, every protected argument explicit,
# non-empty and trusted: the decision may have been steered, the data was not.
test_steered_asks if {
	d := gate.decision with input as call(rules, [prompt, mail], {"to": explicit([prompt]), "memo": explicit([mail])})
	d.decision == "ask"
	d.findings == {
		{"rule": "steered", "outcome": "ask", "sources": {{"arg": "to", "entry": "prompt"}}},
		{"rule": "tainted-justification", "entry": "mail"},
	}
}

test_steered_catalog_deny if {
	tool := object.union(rules, {"on_steered": "deny"})
	d := gate.decision with input as call(tool, [prompt, mail], {"to": explicit([prompt]), "memo": explicit([mail])})
	d.decision == "deny"
	found(d, {"rule": "steered", "outcome": "deny"})
}

test_steered_catalog_allow if {
	tool := object.union(rules, {"on_steered": "allow"})
	d := gate.decision with input as call(tool, [prompt, mail], {"to": explicit([prompt]), "memo": explicit([mail])})
	d.decision == "allow"
	found(d, {"rule": "steered", "outcome": "allow"})
}

test_steered_catalog_allow_still_asks_on_a_weak_argument if {
	tool := object.union(rules, {"on_steered": "allow"})
	w := entry("w", "user", "external")
	d := gate.decision with input as call(tool, [prompt, mail], {"to": explicit([w]), "memo": explicit([mail])})
	d.decision == "ask"
	found(d, {"rule": "steered", "outcome": "allow"})
	found(d, {"rule": "weak-argument", "arg": "to", "entry": "w"})
}

test_steered_unknown_outcome_asks if {
	tool := object.union(rules, {"on_steered": "maybe"})
	d := gate.decision with input as call(tool, [prompt, mail], {"to": explicit([prompt]), "memo": explicit([mail])})
	d.decision == "ask"
}

test_steered_needs_every_protected_argument if {
	args := {"to": explicit([prompt]), "iban": explicit([mail]), "memo": explicit([mail])}
	d := gate.decision with input as call(rules, [prompt, mail], args)
	d.decision == "deny"
	d.findings == {{"rule": "untrusted-argument", "arg": "iban", "entry": "mail"}, {"rule": "tainted-justification", "entry": "mail"}}
}

test_unsourced_argument_denies_in_a_tainted_context if {
	args := {"to": from_justification([prompt, mail]), "memo": explicit([mail])}
	d := gate.decision with input as call(rules, [prompt, mail], args)
	d.decision == "deny"
	d.findings == {{"rule": "unsourced-argument", "arg": "to"}, {"rule": "tainted-justification", "entry": "mail"}}
}

test_unsourced_argument_asks_with_ask_on_untrusted if {
	tool := object.union(rules, {"ask_on_untrusted": true})
	args := {"to": from_justification([prompt, mail]), "memo": explicit([mail])}
	d := gate.decision with input as call(tool, [prompt, mail], args)
	d.decision == "ask"
	found(d, {"rule": "unsourced-argument", "arg": "to"})
}

# Issue 14 item 3: an explicit empty source list excuses nothing.
test_empty_sources_deny_in_a_tainted_context if {
	d := gate.decision with input as call(rules, [mail], {"to": explicit([]), "memo": explicit([mail])})
	d.decision == "deny"
	d.findings == {{"rule": "empty-sources", "arg": "to"}, {"rule": "tainted-justification", "entry": "mail"}}
}

test_empty_sources_allow_in_a_trusted_context if {
	d := gate.decision with input as call(rules, [prompt], {"to": explicit([]), "memo": explicit([prompt])})
	d.decision == "allow"
}

# The looser rule ("tainted context alone asks") is not the rule: a call
# without any protected argument stays denied.
test_no_protected_argument_denies_in_a_tainted_context if {
	d := gate.decision with input as call(rules, [prompt, mail], {"memo": explicit([mail])})
	d.decision == "deny"
	d.findings == {{"rule": "no-protected-argument"}, {"rule": "tainted-justification", "entry": "mail"}}
}

test_no_arguments_deny_in_a_tainted_context if {
	d := gate.decision with input as call(rules, [mail], {})
	d.decision == "deny"
	found(d, {"rule": "no-protected-argument"})
}

test_no_arguments_allow_in_a_trusted_context if {
	d := gate.decision with input as call(rules, [prompt], {})
	d.decision == "allow"
}

test_approval_allows_and_names_itself if {
	a := {"id": "appr1234567890", "approver": "user:alice", "approver_tier": "user"}
	i := object.union(call(base.tool, [mail], {"to": from_justification([mail])}), {"approvals": [a]})
	d := gate.decision with input as i
	d.decision == "allow"
	d.approval == "appr1234567890"
	d.findings == {
		{"rule": "approved", "approval": "appr1234567890"},
		{"rule": "overridden", "by": {"rule": "unsourced-argument", "arg": "to"}},
		{"rule": "overridden", "by": {"rule": "tainted-justification", "entry": "mail"}},
	}
}

test_approval_allows_a_steered_call if {
	a := {"id": "appr1234567890", "approver": "user:alice", "approver_tier": "user"}
	i := object.union(call(rules, [prompt, mail], {"to": explicit([prompt]), "memo": explicit([mail])}), {"approvals": [a]})
	d := gate.decision with input as i
	d.decision == "allow"
	d.approval == "appr1234567890"
}

test_approval_not_used_when_not_needed if {
	a := {"id": "appr1234567890", "approver": "user:alice", "approver_tier": "user"}
	i := object.union(call(base.tool, [prompt], {"to": from_justification([prompt])}), {"approvals": [a]})
	d := gate.decision with input as i
	d.decision == "allow"
	not d.approval
}

test_approval_not_used_when_the_catalog_allows_a_steered_call if {
	a := {"id": "appr1234567890", "approver": "user:alice", "approver_tier": "user"}
	tool := object.union(rules, {"on_steered": "allow"})
	i := object.union(call(tool, [prompt, mail], {"to": explicit([prompt]), "memo": explicit([mail])}), {"approvals": [a]})
	d := gate.decision with input as i
	d.decision == "allow"
	not d.approval
}

test_alerts_are_warnings_not_denials if {
	t := {"features": {}, "alerts": [{"rule": "r", "message": "recall before send", "at": 3}]}
	d := gate.decision with input as object.union(call(base.tool, [prompt], {}), {"trajectory": t})
	d.decision == "allow"
	d.warnings == ["trajectory: recall before send"]
}

# The default is not dead code: an input that names no justification or no
# arguments reaches no rule, and the default denies.
test_default_denies_without_a_justification if {
	d := gate.decision with input as object.remove(base, ["justification"])
	d == {"decision": "deny", "reasons": ["policy: no rule produced a decision"], "warnings": []}
}

test_default_denies_without_arguments if {
	d := gate.decision with input as object.remove(base, ["arguments"])
	d.decision == "deny"
	d.reasons == ["policy: no rule produced a decision"]
}

test_plan_with_authority_is_named if {
	p := object.union(prompt, {"id": "plan0", "kind": "plan"})
	i := object.union(call(rules, [p], {"to": explicit([p]), "memo": explicit([mail])}), {"plan": {"cited": true, "authority": true, "id": "plan0", "step": 0, "why": ""}})
	d := gate.decision with input as i
	d.decision == "allow"
	d.findings == {{"rule": "trusted"}, {"rule": "plan-used"}}
}

test_plan_without_authority_says_why if {
	i := object.union(call(rules, [prompt, mail], {"to": from_justification([prompt, mail])}), {"plan": {"cited": true, "authority": false, "id": "plan0", "step": 1, "why": "the call's tool x is not the step's y"}})
	d := gate.decision with input as i
	d.decision == "deny"
	found(d, {"rule": "plan-unused"})
	not found(d, {"rule": "plan-used"})
}

plan_entry := object.union(prompt, {"id": "plan0", "kind": "plan", "principal": "agent:a"})

under_plan := {"cited": true, "authority": true, "id": "plan0", "step": 0, "why": ""}

# Issue 17 section 3: recipients literal in the plan, the body data from a
# poisoned file: allowed.
test_plan_literal_recipient_and_untrusted_body_allow if {
	args := {
		"to": {"explicit": true, "sources": [plan_entry], "slot": "literal"},
		"memo": {"explicit": true, "sources": [mail], "slot": "data"},
	}
	i := object.union(call(rules, [plan_entry], args), {"plan": under_plan})
	d := gate.decision with input as i
	d.decision == "allow"
}

# The IBAN of the bill comes from the file: denied.
test_plan_data_slot_from_untrusted_denies if {
	args := {"to": {"explicit": true, "sources": [mail], "slot": "data"}}
	i := object.union(call(rules, [plan_entry], args), {"plan": under_plan})
	d := gate.decision with input as i
	d.decision == "deny"
	d.findings == {{"rule": "untrusted-argument", "arg": "to", "entry": "mail"}, {"rule": "plan-used"}}
}

test_plan_protected_data_slot_without_sources_denies if {
	args := {"to": {"explicit": false, "sources": [plan_entry], "slot": "data"}}
	i := object.union(call(rules, [plan_entry], args), {"plan": under_plan})
	d := gate.decision with input as i
	d.decision == "deny"
	d.findings == {{"rule": "unsourced-data", "arg": "to"}, {"rule": "plan-used"}}
}

test_plan_protected_data_slot_with_empty_sources_denies if {
	args := {"to": {"explicit": true, "sources": [], "slot": "data"}}
	i := object.union(call(rules, [plan_entry], args), {"plan": under_plan})
	d := gate.decision with input as i
	d.decision == "deny"
	found(d, {"rule": "unsourced-data", "arg": "to"})
}

test_plan_unprotected_data_slot_without_sources_allows if {
	args := {
		"to": {"explicit": true, "sources": [plan_entry], "slot": "literal"},
		"memo": {"explicit": false, "sources": [plan_entry], "slot": "data"},
	}
	i := object.union(call(rules, [plan_entry], args), {"plan": under_plan})
	d := gate.decision with input as i
	d.decision == "allow"
}

# Issue 34: a delegated slot names the step whose output supplies the
# value; bill is that output (from lists it), other is not.
bill := object.union(entry("bill", "external", "external"), {"principal": "tool:file_read"})

other := object.union(entry("other", "external", "external"), {"principal": "tool:web"})

delegated(srcs, from) := {"explicit": true, "sources": srcs, "slot": "delegated", "delegation": {"step": 0, "tool": "file_read", "args": {"path": "bill.txt"}, "from": from}}

delegated_call(tool, args) := object.union(call(tool, [plan_entry], args), {"plan": object.union(under_plan, {"earlier": 0})})

test_delegated_asks if {
	d := gate.decision with input as delegated_call(rules, {"to": delegated([bill], ["bill"])})
	d.decision == "ask"
	d.findings == {{"rule": "delegated", "arg": "to", "entry": "bill"}, {"rule": "plan-used"}}
}

test_delegated_with_another_untrusted_source_denies if {
	d := gate.decision with input as delegated_call(rules, {"to": delegated([bill, other], ["bill"])})
	d.decision == "deny"
	found(d, {"rule": "untrusted-argument", "arg": "to", "entry": "other"})
	not found(d, {"rule": "untrusted-argument", "arg": "to", "entry": "bill"})
}

# The source is not the named one's output (another file read, another
# plan's step): an untrusted argument, as without a plan.
test_delegated_from_elsewhere_denies if {
	d := gate.decision with input as delegated_call(rules, {"to": delegated([other], [])})
	d.decision == "deny"
	d.findings == {{"rule": "untrusted-argument", "arg": "to", "entry": "other"}, {"rule": "plan-used"}}
}

# from counts only in a delegated slot.
test_delegation_outside_a_delegated_slot_denies if {
	arg := object.union(delegated([bill], ["bill"]), {"slot": "data"})
	d := gate.decision with input as delegated_call(rules, {"to": arg})
	d.decision == "deny"
	found(d, {"rule": "untrusted-argument", "arg": "to", "entry": "bill"})
}

test_delegated_with_trusted_sources_allows if {
	d := gate.decision with input as delegated_call(rules, {"to": delegated([prompt], ["prompt"])})
	d.decision == "allow"
	d.findings == {{"rule": "trusted"}, {"rule": "plan-used"}}
}

test_delegated_unprotected_argument_allows if {
	d := gate.decision with input as delegated_call(rules, {"memo": delegated([bill], ["bill"])})
	d.decision == "allow"
	d.findings == {{"rule": "trusted"}, {"rule": "plan-used"}}
}

test_delegated_without_sources_denies if {
	arg := object.union(delegated([], []), {"explicit": false})
	d := gate.decision with input as delegated_call(rules, {"to": arg})
	d.decision == "deny"
	found(d, {"rule": "unsourced-data", "arg": "to"})
}

test_on_delegated if {
	every outcome in ["ask", "deny", "allow"] {
		tool := object.union(rules, {"on_delegated": outcome})
		d := gate.decision with input as delegated_call(tool, {"to": delegated([bill], ["bill"])})
		d.decision == outcome
		found(d, {"rule": "delegated", "arg": "to", "entry": "bill"})
	}
	tool := object.union(rules, {"on_delegated": "sometimes"})
	d := gate.decision with input as delegated_call(tool, {"to": delegated([bill], ["bill"])})
	d.decision == "ask"
}

# A person confirms: the approval of the exact call allows it once.
test_delegated_approved_allows if {
	i := object.union(delegated_call(rules, {"to": delegated([bill], ["bill"])}), {"approvals": [{"id": "ap1", "approver": "user:alice", "approver_tier": "user", "expires": "x"}]})
	d := gate.decision with input as i
	d.decision == "allow"
	found(d, {"rule": "overridden", "by": {"rule": "delegated", "arg": "to", "entry": "bill"}})
}

# A delegation holds once per step: a second call that carries out the
# step from the same source is denied, saying why.
test_delegated_repeat_denies if {
	i := object.union(delegated_call(rules, {"to": delegated([bill], ["bill"])}), {"plan": object.union(under_plan, {"earlier": 1})})
	d := gate.decision with input as i
	d.decision == "deny"
	found(d, {"rule": "delegated-repeat", "arg": "to"})
	found(d, {"rule": "untrusted-argument", "arg": "to", "entry": "bill"})
	not found(d, {"rule": "delegated"})
}

# Only a delegated protected argument drawn from its source is a repeat.
test_delegated_repeat_needs_the_source if {
	plan := {"plan": object.union(under_plan, {"earlier": 1})}
	d := gate.decision with input as object.union(delegated_call(rules, {"to": delegated([prompt], [])}), plan)
	d.decision == "allow"
	e := gate.decision with input as object.union(delegated_call(rules, {"memo": delegated([bill], ["bill"])}), plan)
	e.decision == "allow"
}

# A plain data slot is no delegation, repeated or not.
test_repeat_outside_a_delegated_slot if {
	arg := object.union(delegated([prompt], ["prompt"]), {"slot": "data"})
	d := gate.decision with input as object.union(delegated_call(rules, {"to": arg}), {"plan": object.union(under_plan, {"earlier": 1})})
	d.decision == "allow"
}

# Without the count of earlier calls, no delegation holds.
test_delegated_without_earlier_denies if {
	i := object.union(call(rules, [plan_entry], {"to": delegated([bill], ["bill"])}), {"plan": under_plan})
	d := gate.decision with input as i
	d.decision == "deny"
}

# A delegated value never excuses an untrusted proposer.
test_delegated_untrusted_proposer_denies if {
	i := delegated_call(rules, {"to": delegated([bill], ["bill"])})
	action := object.union(i.action, {"principal": "tool:web", "principal_tier": "external"})
	d := gate.decision with input as object.union(i, {"action": action})
	d.decision == "deny"
}

test_untrusted_proposer_denies if {
	every tier in ["unverified", "external"] {
		action := object.union(base.action, {"principal": "tool:web", "principal_tier": tier})
		d := gate.decision with input as object.union(base, {"action": action, "justification": [entry("a", "user", "user")]})
		d.decision == "deny"
		d.findings == {{"rule": "untrusted-proposer"}}
	}
	every tier in ["internal", "user"] {
		action := object.union(base.action, {"principal": "agent:a", "principal_tier": tier})
		d := gate.decision with input as object.union(base, {"action": action, "justification": [entry("a", "user", "user")]})
		d.decision == "allow"
	}
}

test_untrusted_proposer_denies_even_a_tool_that_is_not_sensitive if {
	action := object.union(base.action, {"principal": "tool:web", "principal_tier": "external"})
	tool := object.union(base.tool, {"sensitive": false})
	d := gate.decision with input as object.union(base, {"action": action, "tool": tool})
	d.decision == "deny"
}

test_sensitive_unknown_is_checked if {
	tool := object.union(base.tool, {"sensitive": "unknown"})
	d := gate.decision with input as object.union(base, {"tool": tool, "justification": [entry("a", "external", "external")]})
	d.decision == "deny"
}
