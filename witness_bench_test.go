package pedigree_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/testkit/enginetest"
)

// BenchmarkRecordSigned measures one recorded entry end to end in memory
// (no fsync): its principal's signature verified, the engine's leaf
// signature made, and, with a witness, its share of a checkpoint signed
// and written every DefaultCheckpointEvery leaves.
//
//	go test -run '^$' -bench BenchmarkRecordSigned -benchmem .
func BenchmarkRecordSigned(b *testing.B) {
	for _, witnessed := range []bool{false, true} {
		b.Run(fmt.Sprintf("witness=%v", witnessed), func(b *testing.B) {
			var opts []pedigree.Option
			if witnessed {
				opts = append(opts, pedigree.WithWitnessFile(filepath.Join(b.TempDir(), "witness.json")))
			}
			w := enginetest.New(b, enginetest.Default, opts...)
			w.SkipVerify = true
			ctx := context.Background()
			key := w.Keys["user:alice"]
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := w.E.Record(ctx, key, pedigree.Entry{Principal: "user:alice", Session: "s", Content: fmt.Appendf(nil, "entry %d", i)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
