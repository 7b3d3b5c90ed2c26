package store

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkCommitAndRead: what an entry costs the store, on each engine:
// one commit of 12 rows scattered over a store of 100k rows (the shape of a
// recorded entry: envelope, node, sequence, context, log leaf, subtree
// hashes and state), then one read transaction of 4 Gets (its parents).
// go test ./internal/store -run - -bench CommitAndRead -benchtime 2000x
func BenchmarkCommitAndRead(b *testing.B) {
	engines := []struct {
		name string
		o    Options
		dir  bool
	}{
		{"memory", Options{InMemory: true}, false},
		{"badger-in-memory", Options{InMemory: true, badgerInMemory: true}, false},
		{"badger-disk-synced", Options{MinFree: -1}, true},
	}
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			dir := ""
			if e.dir {
				dir = b.TempDir()
			}
			d, err := Create(dir, e.o)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			const rows = 100_000
			val := make([]byte, 300)
			for i := 0; i < rows; i += 1000 {
				err := d.update(func(t *Txn) error {
					for j := i; j < i+1000; j++ {
						if err := t.In(Lineage).Set(fmt.Appendf(nil, "n/%08x", uint32(j)*2654435761), val); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			r := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				err := d.Commit(b.Context(), 4000, func(t *Txn) error {
					for k := range 12 {
						if err := t.In(Lineage).Set(fmt.Appendf(nil, "w/%08x/%d", r.Uint32(), k), val); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				err = d.View(func(t *Txn) error {
					for range 4 {
						_, err := t.In(Lineage).Get(fmt.Appendf(nil, "n/%08x", uint32(r.IntN(rows))*2654435761))
						if err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
