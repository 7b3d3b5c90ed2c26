# A policy written the naive way: allow unless tainted. tainted calls a
# builtin that errors on this input (to_number of a non-number). Without
# strict builtin errors the error makes `tainted` undefined, so `not tainted`
# holds and the call is allowed: fail open. The gate must deny instead.
package pedigree.gate

import rego.v1

default decision := {"decision": "deny", "reasons": ["default"]}

decision := {"decision": "allow", "reasons": ["not tainted"]} if not tainted

tainted if to_number(input.action.args.amount) > 100
