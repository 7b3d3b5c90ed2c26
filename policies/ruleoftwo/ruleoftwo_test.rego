package pedigree.ext.ruleoftwo_test

import rego.v1

import data.pedigree.gate

prompt := {
	"id": "prompt", "principal": "user:alice", "kind": "prompt", "tier": "user",
	"effective_tier": "user", "reach_tier": "user", "untrusted": [],
}

plan := object.union(prompt, {"id": "plan0", "kind": "plan", "principal": "agent:a"})

mail := object.union(prompt, {
	"id": "mail", "principal": "tool:mail", "tier": "external", "effective_tier": "external", "reach_tier": "external",
	"untrusted": [{"id": "mail", "principal": "tool:mail", "tier": "external", "hops": 0, "strong": true}],
})

diluted := object.union(prompt, {"id": "diluted", "reach_tier": "external"})

send := {"known": true, "sensitive": true, "irreversible": true, "external_sink": true, "role": "send", "ask_on_untrusted": false, "on_steered": "", "args": {"to": {"trusted": true}, "body": {"trusted": false}}}

recalled := {"features": {"n_recall": 1, "n_list": 0}, "alerts": []}

fresh := {"features": {"n_recall": 0, "n_list": 0}, "alerts": []}

# A send under a plan: the recipient is the plan's literal, the body comes
# from an email. The default policy allows it.
call(tool, trajectory, body) := {
	"action": {"tool": "email_send", "args": {"to": "bob@example.com", "body": "x"}, "principal": "agent:a", "session": "s"},
	"tool": tool,
	"justification": [plan],
	"arguments": {
		"to": {"explicit": true, "sources": [plan], "slot": "literal"},
		"body": {"explicit": true, "sources": [body], "slot": "data"},
	},
	"trajectory": trajectory,
	"approvals": [],
	"plan": {"cited": true, "authority": true, "id": "plan0", "step": 0, "why": ""},
}

test_all_three_ask if {
	d := gate.decision with input as call(send, recalled, mail)
	d.decision == "ask"
	{"rule": "extension", "reason": "policies/ruleoftwo: email_send would hold untrusted input (mail), private data and a state change or external communication at once"} in d.findings
}

test_without_untrusted_input_allows if {
	d := gate.decision with input as call(send, recalled, prompt)
	d.decision == "allow"
}

test_without_private_data_allows if {
	d := gate.decision with input as call(send, fresh, mail)
	d.decision == "allow"
}

test_this_call_reading_private_data_counts if {
	tool := object.union(send, {"role": "list"})
	d := gate.decision with input as call(tool, fresh, mail)
	d.decision == "ask"
}

test_listing_counts_as_private_data if {
	d := gate.decision with input as call(send, {"features": {"n_recall": 0, "n_list": 2}, "alerts": []}, mail)
	d.decision == "ask"
}

test_without_state_change_allows if {
	tool := object.union(send, {"irreversible": false, "external_sink": false, "role": "other"})
	d := gate.decision with input as call(tool, recalled, mail)
	d.decision == "allow"
}

test_save_is_a_state_change if {
	tool := object.union(send, {"irreversible": false, "external_sink": false, "role": "save"})
	d := gate.decision with input as call(tool, recalled, mail)
	d.decision == "ask"
}

test_weak_untrusted_ancestry_counts if {
	d := gate.decision with input as call(send, recalled, diluted)
	d.decision == "ask"
}

test_not_sensitive_is_allowed if {
	tool := object.union(send, {"sensitive": false})
	d := gate.decision with input as call(tool, recalled, mail)
	d.decision == "allow"
}

test_approval_lets_it_through_once if {
	i := object.union(call(send, recalled, mail), {"approvals": [{"id": "appr1234567890", "approver": "user:alice", "approver_tier": "user"}]})
	d := gate.decision with input as i
	d.decision == "allow"
	d.approval == "appr1234567890"
}

test_a_deny_still_wins if {
	i := object.union(call(send, recalled, mail), {"arguments": {"to": {"explicit": true, "sources": [mail], "slot": "data"}}})
	d := gate.decision with input as i
	d.decision == "deny"
}
