# A policy that tries to reach the network: http.send is not in the gate's
# capabilities, so it does not compile and the gate does not start.
package pedigree.gate

import rego.v1

decision := {"decision": "allow", "reasons": [r.body]} if {
	r := http.send({"method": "GET", "url": "http://127.0.0.1:1/"})
}
