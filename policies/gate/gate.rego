# The default gate policy. It reads the input the gate builds from lineage
# (see gate/input.go) and yields one decision object:
#   {"decision": "allow"|"deny"|"ask", "findings": {finding, ...},
#    "warnings": [...], "approval": "<approval id>" (only when one is used)}
# Anything else, an error or an undefined result, is a deny in the gate.
#
# A finding names the rule that fired and what it fired on, nothing more:
#   {"rule": R} and, where they apply, "arg" (an argument's name), "entry"
#   (an entry's ID), "approval" (an approval's ID), "outcome" and "sources"
#   (the steered rule's), "by" (the finding an approval overrides) and
#   "reason" (an extension's own text).
# The gate writes each finding's reason for people from the rule and the
# input (gate/reason.go), so the policy does no string work on a check.
#
# A call has a control justification (input.justification: what decided
# that the call happens) and, per argument, data provenance
# (input.arguments). The rules:
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
#   delegated            under a plan, a protected argument comes   ask (catalog
#                        from the untrusted source its step names   on_delegated)
#                        (and from nothing else untrusted), the
#                        step's first call
#   delegated-repeat     the same, but another call carried out     deny
#                        the step from that source before
#   steered              tainted control, every protected argument  ask (catalog
#                        comes from explicit, trusted sources       on_steered)
#   weak-justification,  an untrusted ancestor through weak edges   ask
#   weak-argument        only
#   trusted              none of the above                          allow
#
# A plan (input.plan) the call matches, made from trusted entries, is the
# control justification (the gate builds input.justification so); its
# literals have the plan as their source (slot "literal") and each data
# slot is judged by its own sources (slot "data"); a delegated slot
# (slot "delegated") names the source its value is to come from, and
# input.arguments[name].delegation.from lists the argument's sources that
# are that source (the gate checked each is the named step's output, or the
# named entry). The plan-used and
# plan-unused findings say whether the plan was used, and why not.
#
# tainted-justification findings name the untrusted control entries beside
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

# Computed once; the rules below look names up in it.
protected_args contains name if {
	some name, _ in input.arguments
	protected(name)
}

# The control justification is tainted when one of its entries is.
control_findings contains {"rule": "tainted-justification", "entry": e.id} if {
	some e in input.justification
	untrusted_tier[e.effective_tier]
}

tainted if count(control_findings) > 0

# A plan the call cites but that does not stand as its control justification
# (another tool, a changed literal, a tainted plan): the call is judged by
# the ordinary rules, and the findings say why the plan was not used.
plan_findings contains {"rule": "plan-unused"} if {
	input.plan.cited
	not input.plan.authority
}

plan_findings contains {"rule": "plan-used"} if input.plan.authority

deny_findings contains {"rule": "untrusted-argument", "arg": name, "entry": s.id} if {
	some name, arg in input.arguments
	arg.explicit
	name in protected_args
	some s in arg.sources
	untrusted_tier[s.effective_tier]
	not delegated_from(arg, s.id)
}

# A delegated argument fills a plan's data slot that names its source: the
# output of an earlier step (which read the file or message the user named)
# or an entry the user named. The sources that are that source are not an
# untrusted argument: the user asked for that data flow. They make the call
# delegated, and a person confirms the value (the catalog's on_delegated).
# Any other untrusted source of the argument still denies.
delegated_from(arg, id) if {
	arg.slot == "delegated"
	input.plan.earlier == 0
	some d in arg.delegation.from
	d == id
}

# A delegation holds once per step and source: a call that carries out a
# step another call of the session carried out already, drawing on the same
# source (input.plan.earlier counts those: an injection asking for the same
# action again, with other values), is judged as without the delegation,
# and says why.
deny_findings contains {"rule": "delegated-repeat", "arg": name} if {
	some name, arg in input.arguments
	arg.slot == "delegated"
	input.plan.earlier > 0
	name in protected_args
	count(arg.delegation.from) > 0
}

delegated_findings contains {"rule": "delegated", "arg": name, "entry": s.id} if {
	some name, arg in input.arguments
	arg.explicit
	name in protected_args
	some s in arg.sources
	untrusted_tier[s.effective_tier]
	delegated_from(arg, s.id)
}

# What a delegated call gets: the catalog's on_delegated, else ask.
delegated_outcome := input.tool.on_delegated if {
	input.tool.on_delegated in {"ask", "deny", "allow"}
} else := "ask"

deny_findings contains f if {
	delegated_outcome == "deny"
	some f in delegated_findings
}

ask_findings contains f if {
	delegated_outcome == "ask"
	some f in delegated_findings
}

# Without provenance of its own, an argument comes from the whole
# justification, which is tainted.
deny_findings contains {"rule": "unsourced-argument", "arg": name} if {
	tainted
	some name, arg in input.arguments
	not arg.explicit
	name in protected_args
}

# An explicit empty source list: the agent composed the value itself, in a
# tainted context. It excuses nothing.
deny_findings contains {"rule": "empty-sources", "arg": name} if {
	tainted
	some name, arg in input.arguments
	arg.explicit
	count(arg.sources) == 0
	name in protected_args
}

# Under a plan, a protected argument that fills a data slot (delegated or
# not) is judged by its own sources alone: it must name them.
data_slot := {"data": true, "delegated": true}

deny_findings contains {"rule": "unsourced-data", "arg": name} if {
	some name, arg in input.arguments
	data_slot[arg.slot]
	name in protected_args
	unsourced(arg)
}

unsourced(arg) if not arg.explicit

unsourced(arg) if count(arg.sources) == 0

deny_findings contains {"rule": "no-protected-argument"} if {
	tainted
	count(protected_args) == 0
}

# Operators extend the policy by adding rules to package pedigree.ext.
deny_findings contains {"rule": "extension", "reason": msg} if some msg in data.pedigree.ext.deny

weak(e) if {
	not untrusted_tier[e.effective_tier]
	untrusted_tier[e.reach_tier]
}

ask_findings contains {"rule": "weak-justification", "entry": e.id} if {
	some e in input.justification
	weak(e)
}

ask_findings contains {"rule": "weak-argument", "arg": name, "entry": s.id} if {
	some name, arg in input.arguments
	arg.explicit
	name in protected_args
	some s in arg.sources
	weak(s)
}

ask_findings contains {"rule": "extension", "reason": msg} if some msg in data.pedigree.ext.ask

untrusted_outcome := "ask" if input.tool.ask_on_untrusted == true else := "deny"

# What a steered call gets: the catalog's on_steered, else ask.
steered_outcome := input.tool.on_steered if {
	input.tool.on_steered in {"ask", "deny", "allow"}
} else := "ask"

# Where each protected argument came from, for the steered reason.
argument_sources contains {"arg": name, "entry": s.id} if {
	some name in protected_args
	some s in input.arguments[name].sources
}

steered := {"rule": "steered", "outcome": steered_outcome, "sources": argument_sources}

blocked if count(deny_findings) + count(ask_findings) > 0

blocked if {
	tainted
	steered_outcome != "allow"
}

# A call proposed by an untrusted principal (a tool that reads mail, a web
# fetcher) is denied whatever it relies on: its own words are untrusted.
verdict := {"decision": "deny", "findings": {{"rule": "untrusted-proposer"}}} if {
	untrusted_tier[input.action.principal_tier]
} else := {"decision": "allow", "findings": {{"rule": "not-sensitive"}}} if {
	# Only a tool the catalog says is not sensitive skips the checks: a
	# missing field (or "unknown") is not "false".
	input.tool.sensitive == false
} else := {
	"decision": "allow",
	"findings": {{"rule": "approved", "approval": a.id}} | {{"rule": "overridden", "by": f} | some f in (deny_findings | ask_findings) | control_findings},
	"approval": a.id,
} if {
	blocked
	a := input.approvals[0]
} else := {"decision": untrusted_outcome, "findings": (deny_findings | control_findings) | plan_findings} if {
	count(deny_findings) > 0
} else := {"decision": "ask", "findings": (({steered} | ask_findings) | control_findings) | plan_findings} if {
	tainted
	steered_outcome == "allow"
	count(ask_findings) > 0
} else := {"decision": steered_outcome, "findings": ({steered} | control_findings) | plan_findings} if {
	tainted
} else := {"decision": "ask", "findings": ask_findings | plan_findings} if {
	count(ask_findings) > 0
} else := {"decision": "allow", "findings": delegated_findings | plan_findings} if {
	# on_delegated: allow (an ask or a deny was decided above).
	count(delegated_findings) > 0
} else := {"decision": "allow", "findings": {{"rule": "trusted"}} | plan_findings} if {
	# Stated, not assumed: an input without a justification or arguments
	# reaches no rule, and the default denies.
	is_array(input.justification)
	is_object(input.arguments)
}
