package pedigree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"slices"

	"github.com/pedigree-ai/pedigree/internal/decisionlog"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/tlog"
)

// Verify checks the whole store in one read transaction: every entry's
// signature, ID, node row, labels and session context (lineage); every
// decision record and its input, and every session's trajectory re-derived
// from the logged decisions and recalls in log order (the decision log);
// and the Merkle log over all of them, its subtree hashes, index rows and
// checkpoints, each leaf against the owner of what it names, at its index. It returns an error
// only when it could not check; what it finds wrong is in the report.
func (e *Engine) Verify(ctx context.Context) (*lineage.Report, error) {
	return e.verifyCheckpoints(ctx, nil)
}

// verifyCheckpoints is Verify, and checks that the store extends each of
// cps, checkpoints kept elsewhere: a store behind one (an old copy
// restored), not an extension of one (rewritten), or one not signed by the
// store's operator key (rebuilt with another) is a problem in the report.
// The report also says how the store's registry is anchored (TrustRoot).
func (e *Engine) verifyCheckpoints(ctx context.Context, cps []tlog.Checkpoint) (*lineage.Report, error) {
	r := &lineage.Report{Problems: []lineage.Problem{}, TrustRoot: e.TrustRoot()}
	bad := func(id, f string, a ...any) {
		r.Problems = append(r.Problems, lineage.Problem{ID: id, What: fmt.Sprintf(f, a...)})
	}
	// The engine's own witnesses count as checkpoints kept elsewhere.
	if w, err := e.witnessed(); err != nil {
		bad("", "%v", err)
	} else {
		cps = append(slices.Clone(cps), w...)
	}
	if e.fleet != nil {
		if err := e.fleet.rewritten(ctx); err != nil {
			bad("", "%v", err)
		}
	}
	if size, _, err := e.log.Head(); err == nil {
		r.LogSize = size
		for _, cp := range cps {
			if cp.Size <= size && e.log.CheckSigned(&cp) == nil {
				r.Witnessed = max(r.Witnessed, cp.Size)
			}
		}
	}
	if e.dir != "" && e.reg.Frozen() {
		// Open compares the copy with the store's record when it is there;
		// its absence is what a deleted freeze record would look like too.
		if _, err := os.Stat(filepath.Join(e.dir, FreezeFile)); errors.Is(err, os.ErrNotExist) {
			bad("", "%s, the copy of the freeze record beside the store, is missing", FreezeFile)
		}
		// The configuration is checked against the seal at open (and used
		// as read then); here it is checked as the directory holds it now.
		files, err := readConfig(e.dir)
		if err != nil {
			return nil, err
		}
		var cse *ConfigSealError
		if err := checkSeal(e.dir, e.reg, files, e.cfg.fleetNode); errors.As(err, &cse) {
			for _, d := range cse.Differences {
				bad("", "%s", d)
			}
		} else if err != nil {
			return nil, err
		}
	}
	err := e.db.View(func(t *store.Txn) error {
		lt, dt := t.In(store.Lineage), t.In(store.Decisions)
		v, err := e.graph.VerifyIn(ctx, lt, bad)
		if err != nil {
			return err
		}
		r.Entries = len(v.Entries)
		decisions, err := e.decisions.DecisionIDs(dt)
		if err != nil {
			return err
		}
		var steps []decisionlog.Step     // every trajectory step, in log order
		recallSeq := map[string]uint64{} // each logged recall record's sequence
		logged := map[byte]map[string]bool{tlog.LeafEntry: {}, tlog.LeafDecision: {}, tlog.LeafRecall: {}}
		leaf := func(index uint64, kind byte, id string) error {
			seen, ok := logged[kind]
			if !ok {
				return fmt.Errorf("unknown leaf kind %q", kind)
			}
			if seen[id] {
				return errors.New("logged twice")
			}
			seen[id] = true
			if !e.cfg.fleetNode {
				if err := e.checkAttestation(t.In(store.Log), index, kind, id); err != nil {
					return err
				}
			}
			switch kind {
			case tlog.LeafEntry:
				seq, ok := v.Entries[id]
				if !ok {
					return errors.New("the logged entry is missing or does not verify")
				}
				if seq != index+1 {
					return fmt.Errorf("the entry's append sequence is %d, its leaf %d", seq, index)
				}
			case tlog.LeafDecision:
				if decisions[id] != index+1 {
					return fmt.Errorf("the decision's append sequence is %d, its leaf %d", decisions[id], index)
				}
				step, err := e.decisions.VerifyDecision(dt, id, index+1)
				if step != nil {
					steps = append(steps, *step)
				}
				return err
			case tlog.LeafRecall:
				session, ok := v.Recalls[id]
				if !ok {
					return errors.New("the logged recall record is missing or does not verify")
				}
				recallSeq[id] = index + 1
				steps = append(steps, decisionlog.RecallStep(session))
			}
			return nil
		}
		if err := e.log.VerifyWith(ctx, t.In(store.Log), cps, leaf, bad); err != nil {
			return err
		}
		if err := e.graph.VerifyContextOrder(ctx, lt, v, recallSeq, bad); err != nil {
			return err
		}
		for id := range v.Entries {
			if !logged[tlog.LeafEntry][id] {
				bad(id, "entry is not in the log")
			}
		}
		for id := range decisions {
			if !logged[tlog.LeafDecision][id] {
				bad(id, "decision is not in the log")
			}
		}
		for id := range v.Recalls {
			if !logged[tlog.LeafRecall][id] {
				bad(id, "recall record is not in the log")
			}
		}
		if err := e.decisions.VerifyTrajectories(ctx, dt, steps, bad); err != nil {
			return err
		}
		used, err := e.decisions.Used(dt)
		if err != nil {
			return err
		}
		if err := e.verifyReviews(lt, dt, v.Entries, bad); err != nil {
			return err
		}
		for approval, decision := range used {
			if decisions[decision] == 0 {
				bad(approval, "approval use by decision %s, which is not logged", decision)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verify could not finish: %w", err)
	}
	return r, nil
}

// VerifyCheckpoints is Engine.Verify, and checks that the store extends
// each checkpoint kept elsewhere.
func (l *Log) VerifyCheckpoints(ctx context.Context, cps []tlog.Checkpoint) (*lineage.Report, error) {
	return l.e.verifyCheckpoints(ctx, cps)
}
