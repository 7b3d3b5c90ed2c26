// Command pedigree keeps LLM agents from acting on poisoned memory: see
// `pedigree --help` and the README.
package main

import (
	"os"

	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
