# Not an extension: a package under pedigree.gate.
package pedigree.gate.helpers

import rego.v1

anything := true
