# Well-formed at start (the probe call has no "probe_marker" argument) but
# undefined for calls that carry one: the gate must deny those.
package pedigree.gate

import rego.v1

decision := {"decision": "allow", "reasons": ["ok"]} if not input.action.args.probe_marker
