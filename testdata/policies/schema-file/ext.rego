# An extension that makes json.match_schema open a local file through a
# $ref: the builtin is not in the gate's capabilities, so the policy does not
# compile and the gate does not start.
package pedigree.ext

import rego.v1

deny contains "schema" if {
	[ok, _] := json.match_schema(input.action.args, {"$ref": "file:///etc/passwd"})
	not ok
}
