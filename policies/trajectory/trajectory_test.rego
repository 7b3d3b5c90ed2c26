package pedigree.ext_test

import rego.v1

import data.pedigree.ext
import data.pedigree.gate

trusted := {
	"id": "prompt", "principal": "user:alice", "kind": "prompt", "tier": "user",
	"effective_tier": "user", "reach_tier": "user", "untrusted": [],
}

tainted := object.union(trusted, {
	"id": "mail", "principal": "tool:mail", "tier": "external", "effective_tier": "external", "reach_tier": "external",
	"untrusted": [{"id": "mail", "principal": "tool:mail", "tier": "external", "hops": 0, "strong": true}],
})

alert(rule) := {"rule": rule, "message": sprintf("message of %s", [rule]), "at": 3}

external_after_recalls := [alert("recall-then-external-send")]

base := {
	"action": {"tool": "email_send", "args": {"to": "x@elsewhere.org"}, "principal": "agent:a", "session": "s"},
	"tool": {"known": true, "sensitive": true, "irreversible": true, "ask_on_untrusted": false, "args": {}},
	"justification": [trusted],
	"arguments": {},
	"trajectory": {"features": {}, "alerts": []},
	"approvals": [],
}

with_alerts(alerts) := object.union(base, {"trajectory": {"features": {}, "alerts": alerts}})

test_external_send_after_recalls_asks if {
	d := gate.decision with input as with_alerts(external_after_recalls)
	d.decision == "ask"
	d.findings == {{"rule": "extension", "reason": "policies/trajectory asks before an external send after recalls: message of recall-then-external-send"}}
	d.warnings == ["trajectory: message of recall-then-external-send"]
}

test_burst_asks_with_both_reasons if {
	d := gate.decision with input as with_alerts([alert("recall-then-external-send"), alert("recall-burst-send")])
	d.decision == "ask"
	count(d.findings) == 2
}

test_no_alert_allows if {
	d := gate.decision with input as base
	d.decision == "allow"
	count(ext.ask) == 0
}

# The module asks on the external-send rules only.
test_other_alerts_stay_warnings if {
	every rule in ["recall-then-send-unknown-recipient", "untrusted-recipient", "model"] {
		d := gate.decision with input as with_alerts([alert(rule)])
		d.decision == "allow"
		d.warnings == [sprintf("trajectory: message of %s", [rule])]
	}
}

test_deny_still_wins if {
	d := gate.decision with input as object.union(with_alerts(external_after_recalls), {"justification": [tainted]})
	d.decision == "deny"
}

test_not_sensitive_still_allowed if {
	call := object.union(with_alerts(external_after_recalls), {"tool": object.union(base.tool, {"sensitive": false})})
	d := gate.decision with input as call
	d.decision == "allow"
}

test_approval_lets_it_through_once if {
	call := object.union(with_alerts(external_after_recalls), {"approvals": [{"id": "approval-0123456789", "approver": "user:alice"}]})
	d := gate.decision with input as call
	d.decision == "allow"
	d.approval == "approval-0123456789"
}
