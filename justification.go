package pedigree

import (
	"context"
	"fmt"
	"strings"

	"github.com/pedigree-ai/pedigree/lineage"
)

// An explicit empty justification never means "relies on nothing": a call
// in a tainted session would otherwise rest on no entry at all.

// checkJustification refuses an explicit justification that names nothing.
func checkJustification(just []string) error {
	if just != nil && len(just) == 0 {
		return fmt.Errorf("%w: the justification is an explicit empty list: name the entries the call relies on, or give none (nil) for the session's whole context", lineage.ErrMalformed)
	}
	for _, j := range just {
		if strings.TrimSpace(j) == "" {
			return fmt.Errorf("%w: the justification names an empty ID", lineage.ErrMalformed)
		}
	}
	return nil
}

// checkParentless refuses a call that names no justification in a session
// whose context is not empty: a call envelope signed elsewhere (the server's
// clients) cannot say "relies on nothing" to skip the context. Only a call
// in an empty session has no parents.
//
// A call that names its context by reference lists no parents and has them
// all the same: its parents are read expanded (AllParents), and one whose
// reference was not resolved is refused here.
func (e *Engine) checkParentless(ctx context.Context, st *lineage.Statement) error {
	ps, err := st.AllParents()
	if err != nil {
		return err
	}
	if len(ps) > 0 {
		return nil
	}
	ids, err := e.graph.Context(ctx, st.Session)
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		return fmt.Errorf("%w: the call names no justification, but session %q has %d entries in context: an empty justification is refused",
			lineage.ErrMalformed, st.Session, len(ids))
	}
	return nil
}
