package pedigree

import (
	"context"
	"testing"

	"github.com/pedigree-ai/pedigree/internal/fleet"
	"github.com/pedigree-ai/pedigree/registry"
)

// BenchmarkFleetRecordSignature is the cost of signing a record a node
// publishes and of checking it on a node that applies it.
func BenchmarkFleetRecordSignature(b *testing.B) {
	ctx := context.Background()
	op, _, _ := registry.GenerateSigner(nil)
	eng, _, _ := registry.GenerateSigner(nil)
	e, err := Init(ctx, b.TempDir()+"/d", DefaultTau, WithOperatorSigner(op), WithEngineSigner(eng))
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if err := e.freeze(ctx, op); err != nil {
		b.Fatal(err)
	}
	rec := []byte(`{"version":1,"envelope":"` + string(make([]byte, 0)) + `eyJ9","content":"aGVsbG8="}`)
	key := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	b.Run("seal", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.sealRecord(fleet.Entry, key, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	sealed, _ := e.sealRecord(fleet.Entry, key, rec)
	b.Run("open", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := e.openRecord(fleet.Entry, key, sealed); err != nil {
				b.Fatal(err)
			}
		}
	})
}
