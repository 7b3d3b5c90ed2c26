# The default gate policy. It reads the input the gate builds from lineage
# (see gate/input.go) and yields one decision object:
#   {"decision": "allow"|"deny"|"ask", "reasons": [...], "warnings": [...],
#    "approval": "<approval id>" (only when an approval is used)}
# Anything else, an error or an undefined result, is a deny in the gate.
package pedigree.gate

import rego.v1

# Looked up as object keys: cheaper than set membership with `in`.
untrusted_tier := {"unverified": true, "external": true}

default decision := {
	"decision": "deny",
	"reasons": ["policy: no rule produced a decision"],
	"warnings": [],
}

decision := object.union(verdict, {"warnings": warnings})

warnings := [sprintf("trajectory: %s", [a.message]) | some a in input.trajectory.alerts]

# An argument is protected unless the catalog has a rule for it saying it may
# come from untrusted text ("trusted": false). An argument the catalog does
# not mention is protected: unknown means careful.
protected(name) if not input.tool.args[name]

protected(name) if input.tool.args[name].trusted == true

# Entries that only feed arguments that may be untrusted are excused from
# the justification rule: that is what a per-argument rule is for. The two
# sets are computed once per evaluation, not once per entry.
protected_source contains s.id if {
	some name, arg in input.arguments
	protected(name)
	some s in arg.sources
}

unprotected_source contains s.id if {
	some name, arg in input.arguments
	arg.explicit
	not protected(name)
	some s in arg.sources
}

excused(id) if {
	unprotected_source[id]
	not protected_source[id]
}

describe(e) := sprintf("descends from %s principal %s", [e.untrusted[0].tier, e.untrusted[0].principal]) if {
	count(e.untrusted) > 0
} else := sprintf("has effective tier %s", [e.effective_tier])

deny_reasons contains msg if {
	some e in input.justification
	untrusted_tier[e.effective_tier]
	not excused(e.id)
	msg := sprintf("justification %s %s", [substring(e.id, 0, 12), describe(e)])
}

# Arguments with explicit provenance. An argument without it comes from the
# whole justification, which the rule above already covers.
deny_reasons contains msg if {
	some name, arg in input.arguments
	arg.explicit
	protected(name)
	some s in arg.sources
	untrusted_tier[s.effective_tier]
	msg := sprintf("argument %s comes from %s, which %s", [name, substring(s.id, 0, 12), describe(s)])
}

# Operators extend the policy by adding rules to package pedigree.ext.
deny_reasons contains msg if some msg in data.pedigree.ext.deny

weak(e) if {
	not untrusted_tier[e.effective_tier]
	untrusted_tier[e.reach_tier]
}

ask_reasons contains msg if {
	some e in input.justification
	weak(e)
	not excused(e.id)
	msg := sprintf("justification %s has an untrusted ancestor through a weak edge only (reach tier %s)", [substring(e.id, 0, 12), e.reach_tier])
}

ask_reasons contains msg if {
	some name, arg in input.arguments
	arg.explicit
	protected(name)
	some s in arg.sources
	weak(s)
	msg := sprintf("argument %s comes from %s, which has an untrusted ancestor through a weak edge only", [name, substring(s.id, 0, 12)])
}

ask_reasons contains msg if some msg in data.pedigree.ext.ask

blocked if count(deny_reasons) + count(ask_reasons) > 0

untrusted_outcome := "ask" if input.tool.ask_on_untrusted else := "deny"

# A call proposed by an untrusted principal (a tool that reads mail, a web
# fetcher) is denied whatever it relies on: its own words are untrusted.
verdict := {"decision": "deny", "reasons": [sprintf("the call is proposed by %s principal %s: an untrusted principal may not propose calls", [input.action.principal_tier, input.action.principal])]} if {
	untrusted_tier[input.action.principal_tier]
} else := {"decision": "allow", "reasons": [sprintf("tool %s is not sensitive", [input.action.tool])]} if {
	# Only a tool the catalog says is not sensitive skips the checks: a
	# missing field (or "unknown") is not "false".
	input.tool.sensitive == false
} else := {
	"decision": "allow",
	"reasons": array.concat(
		[sprintf("approved once by %s (approval %s)", [a.approver, substring(a.id, 0, 12)])],
		[sprintf("overridden by the approval: %s", [r]) | some r in sort(deny_reasons | ask_reasons)],
	),
	"approval": a.id,
} if {
	blocked
	a := input.approvals[0]
} else := {"decision": untrusted_outcome, "reasons": sort(deny_reasons)} if {
	count(deny_reasons) > 0
} else := {"decision": "ask", "reasons": sort(ask_reasons)} if {
	count(ask_reasons) > 0
} else := {"decision": "allow", "reasons": ["every justification and protected argument is trusted"]}
