# A well-placed extension whose data file reaches into the default policy's
# package: refused.
package pedigree.ext

import rego.v1

deny contains "never" if false
