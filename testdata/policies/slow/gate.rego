# Fast for the start-up probe, very slow when the call has a "spin"
# argument: the gate's timeout must deny.
package pedigree.gate

import rego.v1

decision := {"decision": "allow", "reasons": ["ok"]} if {
	n := object.get(input.action.args, "spin", 0)
	count([x | some x in numbers.range(1, n); x % 7 == 0]) >= 0
}
