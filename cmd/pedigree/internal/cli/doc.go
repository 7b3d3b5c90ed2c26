// Package cli is the pedigree command: one file per verb behind
// NewRootCommand, printing through the command's writers so tests can read
// it. Only main calls os.Exit, with the code derived in exit.go.
package cli
