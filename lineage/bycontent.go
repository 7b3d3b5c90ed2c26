package lineage

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pedigree-ai/pedigree/kv"
)

// The content index finds the memory entries that hold a given content: a
// memory server that returns an observation gives back only its text, and
// the gateway needs the entries that wrote it to keep their taint. Only
// memory entries are indexed (one key each, written in the transaction that
// stores the entry); every hit is checked against the entry's signed
// statement when read, so a key added behind the engine's back cannot
// attribute content to an entry that did not sign it. A deleted key makes
// the content look unattributed, which the gateway treats as unverified.
const pByContent = "cd/" // cd/<content digest>\x00<id> -> empty

// MaxByContent bounds the entries one content look-up returns.
const MaxByContent = 256

func byContentKey(digest, id string) []byte { return []byte(pByContent + digest + "\x00" + id) }

// indexContent adds a memory entry to the content index, inside the
// transaction that stores it.
func indexContent(t kv.Txn, st *Statement, id string) error {
	if st.Kind != KindMemory {
		return nil
	}
	return t.Set(byContentKey(st.ContentDigest, id), nil)
}

// ByContent returns the IDs of the memory entries whose signed content
// digest is digest ("sha256:<hex>"), in ID order, at most MaxByContent.
func (g *Graph) ByContent(ctx context.Context, digest string) ([]string, error) {
	if !strings.HasPrefix(digest, "sha256:") || len(digest) != len("sha256:")+64 || !IsID(digest[len("sha256:"):]) {
		return nil, fmt.Errorf("%w: content digest %q: want sha256:<64 hex>", ErrMalformed, digest)
	}
	var ids []string
	prefix := append([]byte(pByContent+digest), 0)
	err := g.store.View(func(t kv.Txn) error {
		return t.Iterate(prefix, false, func(k, _ []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if len(ids) == MaxByContent {
				return nil
			}
			id := string(k[len(prefix):])
			env, err := t.Get(key(pEnvelope, id))
			if errors.Is(err, kv.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			st, _, _, err := Open(env)
			if err != nil || st.Kind != KindMemory || st.ContentDigest != digest {
				return nil // not what the key says: ignored, never trusted
			}
			ids = append(ids, id)
			return nil
		})
	})
	return ids, err
}

// verifyContentIndex re-derives the content index from the verified
// entries' statements: every memory entry has its row, and every row names
// a memory entry of that digest.
func verifyContentIndex(ctx context.Context, t kv.Txn, stmts map[string]*Statement, bad func(id, f string, a ...any)) error {
	for id, st := range stmts {
		if st.Kind != KindMemory {
			continue
		}
		if ok, err := t.Has(byContentKey(st.ContentDigest, id)); err != nil {
			return err
		} else if !ok {
			bad(id, "memory entry missing from the content index")
		}
	}
	return t.Iterate([]byte(pByContent), false, func(k, _ []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		rest := string(k[len(pByContent):])
		digest, id, ok := strings.Cut(rest, "\x00")
		if st := stmts[id]; !ok || st == nil || st.Kind != KindMemory || st.ContentDigest != digest {
			bad(id, "content index row that no memory entry accounts for")
		}
		return nil
	})
}
