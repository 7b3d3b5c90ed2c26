# An optional module, off unless an operator enables it: the Rule of Two.
# An agent should not, in one session and without a person's approval, hold
# all three of
#
#   [A] untrusted input: the call rests on content an untrusted principal
#       wrote (an entry of its justification, or a source of one of its
#       arguments, with an untrusted effective or reach tier);
#   [B] private data: the session has read private data (a call of catalog
#       role recall or list in its trajectory, this one included);
#   [C] a state change or external communication: the call is sensitive and
#       the catalog marks it irreversible, an external sink, or role send or
#       save.
#
# A call that would complete all three asks. Enable it with
#
#   pedigree gate check ... --policies policies/ruleoftwo
#   pedigree serve --policies policies/ruleoftwo
#
# or copy this file into the policy directory you already pass. It extends
# the default policy through package pedigree.ext: its reason joins the
# default's ask reasons, so a deny still wins, a tool the catalog says is not
# sensitive is still allowed, and an approval of the exact call still lets
# it through once. [A] reads what the call rests on: with the default
# justification (the session's whole context) that is everything the
# session has seen.
package pedigree.ext

import rego.v1

rule_of_two_untrusted := {"unverified": true, "external": true}

rule_of_two_entries contains e if some e in input.justification

rule_of_two_entries contains s if {
	some _, arg in input.arguments
	some s in arg.sources
}

rule_of_two_untrusted_input contains e.id if {
	some e in rule_of_two_entries
	rule_of_two_untrusted[e.reach_tier]
}

rule_of_two_untrusted_input contains e.id if {
	some e in rule_of_two_entries
	rule_of_two_untrusted[e.effective_tier]
}

# Features count the session's calls before this one; this call counts too.
rule_of_two_private_read if input.trajectory.features.n_recall > 0

rule_of_two_private_read if input.trajectory.features.n_list > 0

rule_of_two_private_read if input.tool.role in {"recall", "list"}

rule_of_two_state_change if {
	input.tool.sensitive != false
	rule_of_two_changes
}

rule_of_two_changes if input.tool.irreversible == true

rule_of_two_changes if input.tool.external_sink == true

rule_of_two_changes if input.tool.role in {"send", "save"}

ask contains msg if {
	count(rule_of_two_untrusted_input) > 0
	rule_of_two_private_read
	rule_of_two_state_change
	msg := sprintf("policies/ruleoftwo: %s would hold untrusted input (%s), private data and a state change or external communication at once", [
		input.action.tool, concat(", ", [substring(id, 0, 12) | some id in sort(rule_of_two_untrusted_input)]),
	])
}
