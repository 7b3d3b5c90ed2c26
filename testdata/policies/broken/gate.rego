package pedigree.gate

import rego.v1

decision := {"decision": "allow", "reasons": [] if {
