package lineage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/registry"
)

// Problem is one thing wrong in the store.
type Problem struct {
	ID   string `json:"id"`
	What string `json:"what"`
}

// Report is the result of Verify.
type Report struct {
	Entries  int       `json:"entries"`
	Problems []Problem `json:"problems"`
	// TrustRoot is how the store's registry is anchored outside it ("pinned
	// key", "pinned digest" or "none"), filled in by the engine, which knows.
	TrustRoot string `json:"trust_root,omitempty"`
}

// OK reports whether nothing was found wrong.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// Verify walks the whole store in append order and checks each entry's
// signature against the frozen registry, its ID against its bytes, each
// parent link in both directions, and its stored labels against a
// recomputation from its parents. It returns an error only when it could not
// check; what it finds wrong is in the report.
func (g *Graph) Verify(ctx context.Context) (*Report, error) {
	return g.VerifyWith(ctx, VerifyOptions{})
}

// VerifyOptions let the owner of other logged records (the gate's
// decisions) take part in verify.
type VerifyOptions struct {
	// Decision checks that a logged decision is stored and intact.
	Decision func(t *store.Txn, id string) error
	// Decisions lists every stored decision, each of which must be logged.
	Decisions func(t *store.Txn) ([]string, error)
	// Checkpoints are checkpoints kept elsewhere: the store must extend
	// each (at least its size, and its root at that size).
	Checkpoints []Checkpoint
}

// VerifyWith is Verify, with the log's decisions checked by o.
func (g *Graph) VerifyWith(ctx context.Context, o VerifyOptions) (*Report, error) {
	r := &Report{Problems: []Problem{}}
	bad := func(id, f string, a ...any) {
		r.Problems = append(r.Problems, Problem{ID: id, What: fmt.Sprintf(f, a...)})
	}
	if !g.reg.Frozen() {
		bad("", "the registry is not frozen")
	}
	err := g.db.View(func(t *store.Txn) error {
		seen := map[string]uint64{} // id -> seq, for entries already checked
		err := t.Iterate([]byte(pSeq), true, func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			r.Entries++
			seq := binary.BigEndian.Uint64(k[len(pSeq):])
			id := string(v)
			if g.verifyEntry(t, id, seq, seen, bad) {
				seen[id] = seq
			}
			return nil
		})
		if err != nil {
			return err
		}
		// Rows that no sequence key accounts for: entries smuggled in
		// beside the log, or edges that name no checked entry.
		if err := t.Iterate([]byte(pNode), false, func(k, _ []byte) error {
			if id := string(k[len(pNode):]); seen[id] == 0 {
				bad(id, "node row not in the append log")
			}
			return nil
		}); err != nil {
			return err
		}
		loggedDecisions := map[string]bool{}
		exists := func(kind byte, id string) error {
			switch kind {
			case LeafEntry:
				if seen[id] == 0 {
					return errors.New("the logged entry is missing or does not verify")
				}
			case LeafDecision:
				loggedDecisions[id] = true
				if o.Decision == nil {
					return nil
				}
				return o.Decision(t, id)
			default:
				return fmt.Errorf("unknown leaf kind %q", kind)
			}
			return nil
		}
		if err := g.verifyLog(ctx, t, seen, o.Checkpoints, exists, bad); err != nil {
			return err
		}
		if o.Decisions != nil {
			ds, err := o.Decisions(t)
			if err != nil {
				return err
			}
			for _, id := range ds {
				if !loggedDecisions[id] {
					bad(id, "decision is not in the log")
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verify could not finish: %w", err)
	}
	return r, nil
}

// verifyEntry checks one entry and reports whether it is there at all (its
// envelope decodes to its ID and its node row exists), so that its children
// can name it.
func (g *Graph) verifyEntry(t *store.Txn, id string, seq uint64, seen map[string]uint64, bad func(string, string, ...any)) bool {
	env, err := t.Get(key(pEnvelope, id))
	if err != nil {
		bad(id, "envelope missing: %v", err)
		return false
	}
	st, payload, gotID, err := Open(env)
	if err != nil {
		bad(id, "envelope does not decode: %v", err)
		return false
	}
	if gotID != id {
		bad(id, "stored under an ID that is not the hash of its bytes (%s)", gotID)
		return false
	}
	p, err := g.checkSignature(st, payload, env)
	if errors.Is(err, registry.ErrUnknownPrincipal) {
		bad(id, "signed by %s: %v", st.Principal, err)
		return false
	}
	if err != nil {
		bad(id, "signature by %s does not verify", st.Principal)
		return false
	}
	if c, err := t.Get(key(pContent, id)); err == nil && DigestContent(c) != st.ContentDigest {
		bad(id, "stored content does not match its signed digest")
	}
	nb, err := t.Get(key(pNode, id))
	if err != nil {
		bad(id, "node row missing")
		return false
	}
	n, err := decodeNode(nb)
	if err != nil {
		bad(id, "node row does not decode: %v", err)
		return false
	}
	if n.Seq != seq {
		bad(id, "node says sequence %d, the append log %d", n.Seq, seq)
	}
	if n.Principal != st.Principal || n.Kind != st.Kind || n.Session != st.Session || n.Tool != st.Tool || n.Time != st.Time {
		bad(id, "node row disagrees with the signed statement")
	}
	if n.Tier != p.Tier {
		bad(id, "stored tier %s, but %s is %s", n.Tier, p.ID, p.Tier)
	}
	want := Node{ID: id, Tier: p.Tier, Effective: p.Tier, Reach: p.Tier}
	if !p.Tier.Trusted() {
		want.EffectiveRoot, want.ReachRoot = id, id
	}
	if !slices.Equal(n.Parents, st.Parents) {
		bad(id, "node row lists other parents or weights than the signed statement")
	}
	for _, par := range st.Parents {
		pseq, ok := seen[par.ID]
		if !ok {
			bad(id, "parent %s is missing or was not written before its child", par.ID)
			continue
		}
		if pseq >= seq {
			bad(id, "parent %s comes after its child in the append log", par.ID)
		}
		pb, err := t.Get(key(pNode, par.ID))
		if err != nil {
			bad(id, "parent %s node row missing", par.ID)
			continue
		}
		pn, err := decodeNode(pb)
		if err != nil {
			bad(id, "parent %s node row does not decode", par.ID)
			continue
		}
		propagate(&want, pn, par.Weight, g.reg.Tau())
	}
	if n.Effective != want.Effective || n.Reach != want.Reach ||
		n.EffectiveVia != want.EffectiveVia || n.ReachVia != want.ReachVia ||
		n.EffectiveRoot != want.EffectiveRoot || n.ReachRoot != want.ReachRoot {
		bad(id, "stored labels (effective %s, reach %s) differ from a recomputation (effective %s, reach %s)",
			n.Effective, n.Reach, want.Effective, want.Reach)
	}
	return true
}
