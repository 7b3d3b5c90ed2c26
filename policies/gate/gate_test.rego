package pedigree.gate_test

import rego.v1

import data.pedigree.gate

entry(id, eff, reach) := {
	"id": id, "principal": "p:x", "kind": "memory", "tier": "internal",
	"effective_tier": eff, "reach_tier": reach,
	"untrusted": [{"id": "root", "principal": "tool:mail", "tier": "external", "hops": 1, "strong": true}],
}

base := {
	"action": {"tool": "send_money", "args": {"to": "1", "memo": "m"}, "principal": "agent:a", "session": "s"},
	"tool": {"known": true, "sensitive": true, "irreversible": true, "ask_on_untrusted": false, "args": {}},
	"justification": [],
	"arguments": {},
	"trajectory": {"features": {}, "alerts": []},
	"approvals": [],
}

test_trusted_justification_allows if {
	d := gate.decision with input as object.union(base, {"justification": [entry("a", "user", "user")]})
	d.decision == "allow"
}

test_untrusted_justification_denies if {
	d := gate.decision with input as object.union(base, {"justification": [entry("a", "external", "external")]})
	d.decision == "deny"
	startswith(d.reasons[0], "justification a descends from external principal tool:mail")
}

test_unverified_denies if {
	d := gate.decision with input as object.union(base, {"justification": [entry("a", "unverified", "unverified")]})
	d.decision == "deny"
}

test_weak_only_asks if {
	d := gate.decision with input as object.union(base, {"justification": [entry("a", "user", "external")]})
	d.decision == "ask"
}

test_ask_on_untrusted if {
	tool := object.union(base.tool, {"ask_on_untrusted": true})
	d := gate.decision with input as object.union(base, {"tool": tool, "justification": [entry("a", "external", "external")]})
	d.decision == "ask"
}

test_not_sensitive_allows if {
	tool := object.union(base.tool, {"sensitive": false})
	d := gate.decision with input as object.union(base, {"tool": tool, "justification": [entry("a", "external", "external")]})
	d.decision == "allow"
}

test_unprotected_argument_excuses_its_source if {
	tool := object.union(base.tool, {"args": {"to": {"trusted": true}, "memo": {"trusted": false}}})
	e := entry("mail", "external", "external")
	p := entry("prompt", "user", "user")
	args := {
		"to": {"explicit": true, "sources": [p]},
		"memo": {"explicit": true, "sources": [e]},
	}
	d := gate.decision with input as object.union(base, {"tool": tool, "justification": [p, e], "arguments": args})
	d.decision == "allow"
}

test_protected_argument_from_untrusted_denies if {
	tool := object.union(base.tool, {"args": {"to": {"trusted": true}, "memo": {"trusted": false}}})
	e := entry("mail", "external", "external")
	p := entry("prompt", "user", "user")
	args := {
		"to": {"explicit": true, "sources": [e]},
		"memo": {"explicit": true, "sources": [p]},
	}
	d := gate.decision with input as object.union(base, {"tool": tool, "justification": [p, e], "arguments": args})
	d.decision == "deny"
}

test_unlisted_argument_is_protected if {
	tool := object.union(base.tool, {"args": {"memo": {"trusted": false}}})
	e := entry("mail", "external", "external")
	args := {
		"to": {"explicit": true, "sources": [e]},
		"memo": {"explicit": true, "sources": [e]},
	}
	d := gate.decision with input as object.union(base, {"tool": tool, "justification": [e], "arguments": args})
	d.decision == "deny"
}

test_approval_allows_and_names_itself if {
	a := {"id": "appr1234567890", "approver": "user:alice", "approver_tier": "user"}
	d := gate.decision with input as object.union(base, {"justification": [entry("a", "external", "external")], "approvals": [a]})
	d.decision == "allow"
	d.approval == "appr1234567890"
}

test_approval_not_used_when_not_needed if {
	a := {"id": "appr1234567890", "approver": "user:alice", "approver_tier": "user"}
	d := gate.decision with input as object.union(base, {"justification": [entry("a", "user", "user")], "approvals": [a]})
	d.decision == "allow"
	not d.approval
}

test_alerts_are_warnings_not_denials if {
	t := {"features": {}, "alerts": [{"rule": "r", "message": "recall before send", "at": 3}]}
	d := gate.decision with input as object.union(base, {"trajectory": t})
	d.decision == "allow"
	d.warnings == ["trajectory: recall before send"]
}

test_missing_sensitive_field_is_sensitive if {
	tool := object.remove(base.tool, ["sensitive"])
	d := gate.decision with input as object.union(base, {"tool": tool, "justification": [entry("a", "external", "external")]})
	d.decision == "deny"
}

test_untrusted_proposer_denies if {
	every tier in ["unverified", "external"] {
		action := object.union(base.action, {"principal": "tool:web", "principal_tier": tier})
		d := gate.decision with input as object.union(base, {"action": action, "justification": [entry("a", "user", "user")]})
		d.decision == "deny"
		d.reasons == [sprintf("the call is proposed by %s principal tool:web: an untrusted principal may not propose calls", [tier])]
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
