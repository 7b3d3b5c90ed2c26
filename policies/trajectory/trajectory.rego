# An optional module, off unless an operator enables it: ask a human before a
# sensitive send to an external recipient that follows recalls in its session.
#
# The default policy only reports trajectory alerts as warnings (the detector
# alone is a falsified blocker: benign agents recall, then send). Operators
# who would rather confirm such sends enable this module:
#
#   pedigree gate check ... --policies policies/trajectory
#   pedigree serve --policies policies/trajectory
#
# or copy this file into the policy directory they already pass. It extends
# the default policy through package pedigree.ext: its reasons join the
# default's ask reasons, so a deny still wins, a tool the catalog says is not
# sensitive is still allowed, and an approval of the exact call still lets it
# through once.
#
# A send whose recipient is unknown (no arguments logged, or no recipient_arg
# in the catalog) raises "recall-then-send-unknown-recipient"; to ask on it
# too, add that rule to the set below in your copy.
package pedigree.ext

import rego.v1

# The trajectory rules whose alert this module turns into an ask.
trajectory_ask_rules := {"recall-then-external-send", "recall-burst-send"}

ask contains msg if {
	some a in input.trajectory.alerts
	a.rule in trajectory_ask_rules
	msg := sprintf("policies/trajectory asks before an external send after recalls: %s", [a.message])
}
