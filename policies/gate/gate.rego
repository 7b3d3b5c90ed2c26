# The default gate policy. It reads the input the gate builds from lineage
# (see gate/input.go) and yields one decision object:
#   {"decision": "allow"|"deny"|"ask", "reasons": [...], "warnings": [...],
#    "approval": "<approval id>" (only when an approval is used)}
# Anything else, an error or an undefined result, is a deny in the gate.
#
# A call has a control justification (input.justification: what decided
# that the call happens) and, per argument, data provenance
# (input.arguments). The rules, each named at the start of its reasons:
#
#   untrusted-proposer   the call's proposer is an unverified or    deny
#                        external principal (whatever the tool)
#   not-sensitive        the catalog says sensitive: false          allow
#   untrusted-argument   a protected argument's explicit source     deny
#                        is untrusted (in any context)
#   unsourced-argument   tainted control, and a protected argument  deny
#                        has no provenance of its own
#   empty-sources        tainted control, and a protected argument  deny
#                        has an explicit empty source list
#   no-protected-argument tainted control, and the call has no      deny
#                        protected argument at all
#   unsourced-data       under a plan, a protected argument fills   deny
#                        a data slot without naming its sources
#   steered              tainted control, every protected argument  ask (catalog
#                        comes from explicit, trusted sources       on_steered)
#   weak-justification,  an untrusted ancestor through weak edges   ask
#   weak-argument        only
#   trusted              none of the above                          allow
#
# A plan (input.plan) the call matches, made from trusted entries, is the
# control justification (the gate builds input.justification so); its
# literals have the plan as their source (slot "literal") and each data
# slot is judged by its own sources (slot "data"). plan reasons say whether
# the plan was used, and why not.
#
# tainted-justification reasons list the untrusted control entries beside
# the rule that fired. ask_on_untrusted turns the denies into asks; an
# unused approval of the exact call turns a deny or an ask into an allow.
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

protected_args contains name if {
	some name, _ in input.arguments
	protected(name)
}

short(id) := substring(id, 0, 12)

describe(e) := sprintf("descends from %s principal %s", [e.untrusted[0].tier, e.untrusted[0].principal]) if {
	count(e.untrusted) > 0
} else := sprintf("has effective tier %s", [e.effective_tier])

# The control justification is tainted when one of its entries is.
tainted_control contains e if {
	some e in input.justification
	untrusted_tier[e.effective_tier]
}

tainted if count(tainted_control) > 0

control_reasons contains msg if {
	some e in tainted_control
	msg := sprintf("tainted-justification: justification %s %s", [short(e.id), describe(e)])
}

# A plan the call cites but that does not stand as its control justification
# (another tool, a changed literal, a tainted plan): the call is judged by
# the ordinary rules, and the reasons say why the plan was not used.
plan_reasons contains msg if {
	input.plan.cited
	not input.plan.authority
	msg := sprintf("plan %s step %d gives no authority: %s", [short(input.plan.id), input.plan.step, input.plan.why])
}

plan_reasons contains msg if {
	input.plan.authority
	msg := sprintf("plan %s step %d is the control justification: the call matches it", [short(input.plan.id), input.plan.step])
}

deny_reasons contains msg if {
	some name, arg in input.arguments
	arg.explicit
	protected(name)
	some s in arg.sources
	untrusted_tier[s.effective_tier]
	msg := sprintf("untrusted-argument: argument %s comes from %s (%s), which %s", [name, short(s.id), s.principal, describe(s)])
}

# Without provenance of its own, an argument comes from the whole
# justification, which is tainted.
deny_reasons contains msg if {
	tainted
	some name, arg in input.arguments
	protected(name)
	not arg.explicit
	msg := sprintf("unsourced-argument: protected argument %s has no provenance of its own: it comes from the tainted justification", [name])
}

# An explicit empty source list: the agent composed the value itself, in a
# tainted context. It excuses nothing.
deny_reasons contains msg if {
	tainted
	some name, arg in input.arguments
	protected(name)
	arg.explicit
	count(arg.sources) == 0
	msg := sprintf("empty-sources: protected argument %s has an empty source list: the agent composed it in a tainted context", [name])
}

# Under a plan, a protected argument that fills a data slot is judged by its
# own sources alone: it must name them.
deny_reasons contains msg if {
	some name, arg in input.arguments
	arg.slot == "data"
	protected(name)
	unsourced(arg)
	msg := sprintf("unsourced-data: protected argument %s fills a data slot of the plan but names no source", [name])
}

unsourced(arg) if not arg.explicit

unsourced(arg) if count(arg.sources) == 0

deny_reasons contains msg if {
	tainted
	count(protected_args) == 0
	msg := "no-protected-argument: the call has no protected argument: nothing vouches for it but the tainted justification"
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
	msg := sprintf("weak-justification: justification %s has an untrusted ancestor through a weak edge only (reach tier %s)", [short(e.id), e.reach_tier])
}

ask_reasons contains msg if {
	some name, arg in input.arguments
	arg.explicit
	protected(name)
	some s in arg.sources
	weak(s)
	msg := sprintf("weak-argument: argument %s comes from %s, which has an untrusted ancestor through a weak edge only", [name, short(s.id)])
}

ask_reasons contains msg if some msg in data.pedigree.ext.ask

untrusted_outcome := "ask" if input.tool.ask_on_untrusted == true else := "deny"

# What a steered call gets: the catalog's on_steered, else ask.
steered_outcome := input.tool.on_steered if {
	input.tool.on_steered in {"ask", "deny", "allow"}
} else := "ask"

# Where each protected argument came from, for the steered reason.
argument_sources contains sprintf("%s <- %s (%s)", [name, short(s.id), s.principal]) if {
	some name in protected_args
	some s in input.arguments[name].sources
}

steered_reason := sprintf("steered: the justification is tainted, but every protected argument comes from trusted entries (%s); the catalog's outcome for %s is %s", [
	concat(", ", sort(argument_sources)), input.action.tool, steered_outcome,
])

blocked if count(deny_reasons) + count(ask_reasons) > 0

blocked if {
	tainted
	steered_outcome != "allow"
}

# A call proposed by an untrusted principal (a tool that reads mail, a web
# fetcher) is denied whatever it relies on: its own words are untrusted.
verdict := {"decision": "deny", "reasons": [sprintf("untrusted-proposer: the call is proposed by %s principal %s: an untrusted principal may not propose calls", [input.action.principal_tier, input.action.principal])]} if {
	untrusted_tier[input.action.principal_tier]
} else := {"decision": "allow", "reasons": [sprintf("not-sensitive: tool %s is not sensitive", [input.action.tool])]} if {
	# Only a tool the catalog says is not sensitive skips the checks: a
	# missing field (or "unknown") is not "false".
	input.tool.sensitive == false
} else := {
	"decision": "allow",
	"reasons": array.concat(
		[sprintf("approved once by %s (approval %s)", [a.approver, short(a.id)])],
		[sprintf("overridden by the approval: %s", [r]) | some r in sort((deny_reasons | ask_reasons) | control_reasons)],
	),
	"approval": a.id,
} if {
	blocked
	a := input.approvals[0]
} else := {"decision": untrusted_outcome, "reasons": array.concat(array.concat(sort(deny_reasons), sort(control_reasons)), sort(plan_reasons))} if {
	count(deny_reasons) > 0
} else := {"decision": "ask", "reasons": array.concat(array.concat([steered_reason], sort(ask_reasons)), sort(control_reasons | plan_reasons))} if {
	tainted
	steered_outcome == "allow"
	count(ask_reasons) > 0
} else := {"decision": steered_outcome, "reasons": array.concat([steered_reason], sort(control_reasons | plan_reasons))} if {
	tainted
} else := {"decision": "ask", "reasons": array.concat(sort(ask_reasons), sort(plan_reasons))} if {
	count(ask_reasons) > 0
} else := {"decision": "allow", "reasons": array.concat(["trusted: every justification and protected argument is trusted"], sort(plan_reasons))} if {
	# Stated, not assumed: an input without a justification or arguments
	# reaches no rule, and the default denies.
	is_array(input.justification)
	is_object(input.arguments)
}
