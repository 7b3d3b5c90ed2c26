package store

import (
	"context"
	"testing"

	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/kv/kvtest"
)

// The kv contract, held to both engines: Badger on disk (as in use, synced),
// Badger's own in-memory mode, and the B-tree in memory that NewInMemory
// uses.
func TestConformance(t *testing.T) {
	engines := map[string]func(t *testing.T) (*DB, error){
		"badger-disk": func(t *testing.T) (*DB, error) { return Create(t.TempDir(), Options{MinFree: -1}) },
		"badger-in-memory": func(t *testing.T) (*DB, error) {
			return Create("", Options{InMemory: true, badgerInMemory: true})
		},
		"memory": func(t *testing.T) (*DB, error) { return Create("", Options{InMemory: true}) },
	}
	for name, create := range engines {
		t.Run(name, func(t *testing.T) {
			kvtest.Run(t, func(t *testing.T) kvtest.Target {
				d, err := create(t)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := d.Close(); err != nil {
						t.Error(err)
					}
				})
				return kvtest.Target{
					A: d.Space(Lineage),
					B: d.Space(Decisions),
					Commit: func(ctx context.Context, fn func(a, b kv.Txn) error) error {
						return d.Commit(ctx, 0, func(t *Txn) error { return fn(t.In(Lineage), t.In(Decisions)) })
					},
				}
			})
		})
	}
}

// TestMemoryEngineIsNotBadger: an in-memory store is the B-tree unless
// a test asks for Badger's mode.
func TestMemoryEngineIsNotBadger(t *testing.T) {
	d, err := Create("", Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, ok := d.kv.(*memEngine); !ok {
		t.Fatalf("Create(\"\", InMemory) runs %T", d.kv)
	}
	if d.Dir() != "" || d.space != nil {
		t.Fatalf("an in-memory store has a directory %q or a free-space check", d.Dir())
	}
}
