package tampertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/decisionlog"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/tlog"
)

// Edit is what an attacker who can write the data directory, but holds no
// key, changes in the log when it rebuilds the store (Rebuild).
type Edit struct {
	// Drop removes these leaves from the log: decisions, or entries
	// (whose rows stay: only an entry at the log's end is cut cleanly).
	Drop map[string]bool
	// Allow rewrites these logged decisions (denies or asks) as allows:
	// a new record, so a new ID.
	Allow map[string]bool
}

// Rebuild is the store-rebuild attack: it reads the store in dir (closed),
// keeps every signed byte (entries, approvals, the registry, the engine's
// attestations, each moved with its leaf) and rewrites everything else as
// it would be had the log held only what the attacker wants: the leaves in
// their order without the dropped decisions, the rewritten decisions
// sealed again (they hash to their new IDs), every sequence, index,
// subtree hash and trajectory recomputed, the checkpoints deleted. Before
// the engine signed its leaves, verify passed on the result. It returns
// the IDs the rewritten decisions got.
func Rebuild(ctx context.Context, dir string, ed Edit) (map[string]string, error) {
	db, err := store.Open(dir, store.Options{})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	renamed := map[string]string{}
	err = db.Commit(ctx, 0, func(tx *store.Txn) error {
		lt, dt, logT := tx.In(store.Lineage), tx.In(store.Decisions), tx.In(store.Log)
		type leaf struct {
			kind byte
			id   string
			att  []byte
		}
		var leaves []leaf
		if err := tlog.LeavesFrom(logT, 0, func(i uint64, kind byte, id string) error {
			att, err := tlog.Attestation(logT, i)
			if err != nil && err != kv.ErrNotFound {
				return err
			}
			leaves = append(leaves, leaf{kind, id, bytes.Clone(att)})
			return nil
		}); err != nil {
			return err
		}
		type decision struct{ body, input []byte }
		decisions := map[string]decision{}
		for _, l := range leaves {
			if l.kind != tlog.LeafDecision {
				continue
			}
			body, err := dt.Get([]byte("g/" + l.id))
			if err != nil {
				return err
			}
			input, err := dt.Get([]byte("gi/" + l.id))
			if err != nil && err != kv.ErrNotFound {
				return err
			}
			decisions[l.id] = decision{bytes.Clone(body), bytes.Clone(input)}
		}
		// Everything derived or logged goes; it is written again below.
		for _, ns := range []struct {
			t        *store.Txn
			prefixes []string
		}{
			{logT, []string{"leaf/", "n/", "i/", "state", "cp/", "a/"}},
			{dt, []string{"g/", "gi/", "gq/", "au/", "t/", "tc/", "ta/"}},
			{lt, []string{"q/"}},
		} {
			for _, p := range ns.prefixes {
				var keys [][]byte
				if err := ns.t.Iterate([]byte(p), false, func(k, _ []byte) error {
					keys = append(keys, bytes.Clone(k))
					return nil
				}); err != nil {
					return err
				}
				for _, k := range keys {
					if err := ns.t.Delete(k); err != nil {
						return err
					}
				}
			}
		}
		dl := decisionlog.New(nil, nil)
		for _, l := range leaves {
			if ed.Drop[l.id] {
				continue
			}
			id := l.id
			var d gate.Decision
			var body []byte
			if l.kind == tlog.LeafDecision {
				rec := decisions[l.id]
				body = rec.body
				if err := json.Unmarshal(body, &d); err != nil {
					return err
				}
				if ed.Allow[l.id] {
					var m map[string]any
					if err := json.Unmarshal(body, &m); err != nil {
						return err
					}
					m["decision"] = string(gate.Allow)
					delete(m, "reasons")
					if body, err = json.Marshal(m); err != nil {
						return err
					}
					if err := json.Unmarshal(body, &d); err != nil {
						return err
					}
					sum := sha256.Sum256(body)
					id = hex.EncodeToString(sum[:])
					renamed[l.id] = id
				}
				d.ID = id
			}
			idx, err := tlog.Append(logT, l.kind, id)
			if err != nil {
				return err
			}
			if l.att != nil {
				// The engine's signature, byte for byte, with its leaf.
				if err := tlog.SetAttestation(logT, idx, l.att); err != nil {
					return err
				}
			}
			switch l.kind {
			case tlog.LeafEntry:
				if err := lineage.UnsafeSetSeq(lt, id, idx+1); err != nil {
					return fmt.Errorf("entry %s: %w", id, err)
				}
			case tlog.LeafDecision:
				step, err := decisionlog.StepOf(body)
				if err != nil {
					return err
				}
				if err := dl.Append(dt, &d, body, decisions[l.id].input, idx+1, step); err != nil {
					return fmt.Errorf("decision %s: %w", id, err)
				}
			case tlog.LeafRecall:
				rb, err := lt.Get([]byte("r/" + id))
				if err != nil {
					return err
				}
				var r struct {
					Session string `json:"session"`
				}
				if err := json.Unmarshal(rb, &r); err != nil {
					return err
				}
				if err := dl.ObserveRecall(dt, r.Session); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return renamed, err
}
