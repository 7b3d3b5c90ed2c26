package lineage_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/lineage"
)

// The content index finds every memory entry of a content, and only memory
// entries.
func TestByContent(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	a := w.record("agent:planner", "s1", "rotate keys on friday", nil)
	b := w.record("tool:gmail_read", "s2", "rotate keys on friday", nil)
	w.record("agent:planner", "s1", "something else", nil)
	st := w.statement("tool:gmail_read", "s1", "rotate keys on friday", nil)
	st.Kind = lineage.KindToolOutput
	out, err := w.store(st, []byte("rotate keys on friday"))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := w.g.ByContent(ctx, lineage.DigestContent([]byte("rotate keys on friday")))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{a.ID, b.ID}
	slices.Sort(want)
	if !slices.Equal(ids, want) || slices.Contains(ids, out.ID) {
		t.Fatalf("by content: %v, want %v", ids, want)
	}
	if ids, err := w.g.ByContent(ctx, lineage.DigestContent([]byte("never written"))); err != nil || len(ids) != 0 {
		t.Fatalf("unknown content: %v %v", ids, err)
	}
	for _, bad := range []string{"", "sha256:zz", "md5:" + a.ID, "sha256:" + a.ID + "0", "sha256:" + a.ID[:63], "sha256:" + strings.ToUpper(a.ID)} {
		if _, err := w.g.ByContent(ctx, bad); !errors.Is(err, lineage.ErrMalformed) {
			t.Errorf("digest %q: %v", bad, err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := w.g.ByContent(cancelled, lineage.DigestContent([]byte("rotate keys on friday"))); !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v", err)
	}
}

// A look-up returns at most MaxByContent entries.
func TestByContentBounded(t *testing.T) {
	w := newWorld(t)
	for range lineage.MaxByContent + 3 {
		w.record("agent:planner", "", "the same words", nil)
	}
	ids, err := w.g.ByContent(t.Context(), lineage.DigestContent([]byte("the same words")))
	if err != nil || len(ids) != lineage.MaxByContent {
		t.Fatalf("%d entries, %v; want %d", len(ids), err, lineage.MaxByContent)
	}
}

// An index row added behind the engine's back attributes nothing: the
// look-up checks each hit against the entry's signed statement, and verify
// names the row. A deleted row is named by verify.
func TestByContentIndexTampered(t *testing.T) {
	digest := lineage.DigestContent([]byte("pay 123-456"))
	for name, c := range map[string]struct {
		edit func(tx kv.Txn, mem, prompt string) error
		bad  func(mem, prompt string) string // the entry verify names
	}{
		"row for a prompt": {
			func(tx kv.Txn, _, prompt string) error { return tx.Set([]byte("cd/"+digest+"\x00"+prompt), nil) },
			func(_, prompt string) string { return prompt },
		},
		"row for another digest": {
			func(tx kv.Txn, mem, _ string) error {
				return tx.Set([]byte("cd/"+lineage.DigestContent([]byte("other"))+"\x00"+mem), nil)
			},
			func(mem, _ string) string { return mem },
		},
		"row for no entry": {
			func(tx kv.Txn, _, _ string) error {
				return tx.Set([]byte("cd/"+digest+"\x00"+strings.Repeat("ab", 32)), nil)
			},
			func(_, _ string) string { return strings.Repeat("ab", 32) },
		},
		"row without its separator": {
			func(tx kv.Txn, mem, _ string) error { return tx.Set([]byte("cd/"+digest+mem), nil) },
			func(_, _ string) string { return "" },
		},
		"row deleted": {
			func(tx kv.Txn, mem, _ string) error { return tx.Delete([]byte("cd/" + digest + "\x00" + mem)) },
			func(mem, _ string) string { return mem },
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			mem := w.record("agent:planner", "", "pay 123-456", nil)
			st := w.statement("user:alice", "", "pay 123-456", nil)
			st.Kind = lineage.KindPrompt
			prompt, err := w.store(st, nil)
			if err != nil {
				t.Fatal(err)
			}
			w.tamper(func(tx kv.Txn) error { return c.edit(tx, mem.ID, prompt.ID) })
			ids, err := w.g.ByContent(t.Context(), digest)
			if err != nil || slices.Contains(ids, prompt.ID) || len(ids) > 1 {
				t.Fatalf("by content after the edit: %v %v", ids, err)
			}
			wantProblem(t, w.verify(), c.bad(mem.ID, prompt.ID), "content index")
		})
	}
}
