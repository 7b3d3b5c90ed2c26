package lineage_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/internal/enginetest"
	"github.com/pedigree-ai/pedigree/lineage"
)

// The content index finds every memory entry of a content, and only memory
// entries.
func TestByContent(t *testing.T) {
	w := enginetest.New(t, enginetest.Default)
	ctx := context.Background()
	a := w.Record("agent:planner", "s1", "rotate keys on friday", nil)
	b := w.Record("tool:gmail_read", "s2", "rotate keys on friday", nil)
	w.Record("agent:planner", "s1", "something else", nil)
	out, err := w.E.Record(ctx, w.Keys["tool:gmail_read"], pedigree.Entry{Principal: "tool:gmail_read", Kind: lineage.KindToolOutput,
		Session: "s1", Content: []byte("rotate keys on friday")})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := w.E.ByContent(ctx, lineage.DigestContent([]byte("rotate keys on friday")))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{a.ID, b.ID}
	slices.Sort(want)
	if !slices.Equal(ids, want) || slices.Contains(ids, out.ID) {
		t.Fatalf("by content: %v, want %v", ids, want)
	}
	if ids, err := w.E.ByContent(ctx, lineage.DigestContent([]byte("never written"))); err != nil || len(ids) != 0 {
		t.Fatalf("unknown content: %v %v", ids, err)
	}
	for _, bad := range []string{"", "sha256:zz", "md5:" + a.ID, "sha256:" + a.ID + "0"} {
		if _, err := w.E.ByContent(ctx, bad); !errors.Is(err, lineage.ErrMalformed) {
			t.Errorf("digest %q: %v", bad, err)
		}
	}
}
