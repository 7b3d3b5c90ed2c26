package main

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs this package's tests from the checkout's root: they read the
// README and docs/ and paste the Quick start there, as a newcomer would.
func TestMain(m *testing.M) {
	if err := os.Chdir("../.."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
