package cli

import (
	"errors"
	"fmt"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/tlog"
)

// hints are the advice a person gets with an error: the library's errors say
// what is wrong, the command says what to do about it.
var hints = []struct {
	err  error
	hint string
}{
	{pedigree.ErrNotInitialized, "run 'pedigree init' first"},
	{pedigree.ErrExists, "use it as it is, or give init another --dir"},
	{registry.ErrNotFrozen, "run 'pedigree registry freeze'"},
	{pedigree.ErrLocked, "start 'pedigree serve' on it, and the other verbs will go through its socket"},
	{tlog.ErrNoCheckpoint, "run 'pedigree log checkpoint' first"},
	{pedigree.ErrTrustRoot, "the store does not match the trust root pinned outside it (--trust-root, $PEDIGREE_TRUST_ROOT, else the keys directory's operator-<h>.pub): its registry may have been rebuilt; do not use it"},
	{tlog.ErrNotExtension, "the store is not the one that checkpoint was taken of, or an old copy of it: do not use it"},
	{pedigree.ErrConfigSeal, "after freeze, tools.yaml and trajectory-model.json count only as the operator sealed them: if the operator made this change, run 'pedigree registry seal' with the operator key; otherwise restore them, and do not use the store until then"},
	{pedigree.ErrTampered, "the store was changed behind pedigree's back: do not use it; see 'pedigree verify'"},
}

// hint is the advice for err, or "".
func hint(err error) string {
	var held errStillLocked
	if errors.As(err, &held) {
		return held.hint()
	}
	for _, h := range hints {
		if errors.Is(err, h.err) {
			return h.hint
		}
	}
	return ""
}

// Exit codes: the contract in CLI.md, defined once. Every verb returns an
// error, and the code is derived from it here.
const (
	ExitOK       = 0 // success; for gate check, allow
	ExitError    = 1 // operational error: bad input, unknown entry, I/O, a store that cannot be opened
	ExitUsage    = 2 // usage error: unknown verb or flag, missing argument
	ExitNegative = 3 // gate check denied; verify found tampering; replay disagreed with expect
	ExitAsk      = 4 // gate check needs a human
)

const exitCodesHelp = `Exit codes:
  0  success; for gate check, allow
  1  operational error: bad input, unknown entry, I/O, a store that cannot be opened
  2  usage error: unknown verb or flag, missing argument
  3  a negative verdict: gate check denied, verify found tampering, the store does not extend
     a checkpoint kept elsewhere (verify --checkpoint, log prove/consistency --checkpoint-file),
     replay disagreed with expect
  4  gate check needs a human (ask)`

// usageError marks a mistake in how the command was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// verdictError carries a negative verdict whose result was already printed.
type verdictError struct {
	code int
	msg  string
}

func (e verdictError) Error() string { return e.msg }

func exitCode(err error) int {
	var u usageError
	var v verdictError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &v):
		return v.code
	case errors.As(err, &u):
		return ExitUsage
	case errors.Is(err, tlog.ErrNotExtension):
		// The store does not extend a checkpoint kept elsewhere: a
		// negative verdict on the store, as verify's.
		return ExitNegative
	}
	return ExitError
}
