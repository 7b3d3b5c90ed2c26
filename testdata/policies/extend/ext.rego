# Extends the default policy: no payments above the limit in data.json.
package pedigree.ext

import rego.v1

deny contains msg if {
	input.action.tool == "send_money"
	input.action.args.amount > data.limits.max_payment
	msg := sprintf("amount %v is above the limit %v", [input.action.args.amount, data.limits.max_payment])
}
