package pedigree_test

import (
	"errors"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

// The store's errors reach a library caller as the facade's sentinels.
func TestErrorsFromOutside(t *testing.T) {
	ctx := t.Context()
	if _, err := pedigree.Open(ctx, t.TempDir()); !errors.Is(err, pedigree.ErrNotInitialized) {
		t.Fatalf("open of an empty directory: %v, want ErrNotInitialized", err)
	}
	w := enginetest.NewOnDisk(t, enginetest.Default)
	if _, err := pedigree.Open(ctx, w.Dir); !errors.Is(err, pedigree.ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	if _, err := pedigree.Init(ctx, w.Dir, 0.5, pedigree.WithOperatorSigner(w.Operator)); !errors.Is(err, pedigree.ErrExists) {
		t.Fatalf("init over a store: %v, want ErrExists", err)
	}
	// A principal row changed behind the engine's back: the evidence is
	// bad, which reads apart from "could not check".
	w.Tamper(func(tx *store.Txn) error { return tx.In(store.Registry).Delete([]byte("p/user:mallory")) })
	err := w.Reopen()
	if !errors.Is(err, pedigree.ErrTampered) {
		t.Fatalf("reopen after tampering: %v, want ErrTampered", err)
	}
	if errors.Is(err, pedigree.ErrLocked) || errors.Is(err, pedigree.ErrNotInitialized) {
		t.Fatalf("a tamper error that also reads as an I/O condition: %v", err)
	}
}

// Contradictory or out-of-range options are refused, not silently ranked.
func TestOptionsValidated(t *testing.T) {
	ctx := t.Context()
	op := enginetest.New(t, nil).Operator
	cases := map[string][]pedigree.Option{
		"policy twice":       {pedigree.WithPolicy(nil), pedigree.WithPolicyDir("x")},
		"catalog twice":      {pedigree.WithCatalog(&gate.Catalog{}), pedigree.WithToolsFile("x")},
		"zero gate timeout":  {pedigree.WithGateTimeout(0)},
		"negative timeout":   {pedigree.WithGateTimeout(-time.Second)},
		"no clock":           {pedigree.WithClock(nil)},
		"extend and replace": {pedigree.WithPolicyDir("x"), pedigree.WithReplacementPolicyDir("y")},
		"operator twice":     {pedigree.WithOperatorSigner(op), pedigree.WithOperatorKeyFile("x")},
		"empty trust root":   {pedigree.WithTrustRoot(pedigree.TrustRoot{})},
	}
	for name, opts := range cases {
		if name == "policy twice" {
			p, err := gate.DefaultPolicy()
			if err != nil {
				t.Fatal(err)
			}
			opts[0] = pedigree.WithPolicy(p)
		}
		if _, err := pedigree.NewInMemory(ctx, 0.5, op, opts...); !errors.Is(err, pedigree.ErrOptions) {
			t.Errorf("%s: %v, want ErrOptions", name, err)
		}
		if _, err := pedigree.Open(ctx, t.TempDir(), opts...); !errors.Is(err, pedigree.ErrOptions) {
			t.Errorf("%s (Open): %v, want ErrOptions", name, err)
		}
	}
}
