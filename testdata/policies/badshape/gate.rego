# A decision of the wrong shape: the gate refuses to start.
package pedigree.gate

import rego.v1

decision := {"verdict": "allow"}
