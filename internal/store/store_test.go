package store

import (
	"strings"
	"testing"
)

// TestOpenRefusesAnotherSchema: a store written with another key layout
// (schema 1 kept edge keys and no parents in node rows) is refused at open,
// not misread.
func TestOpenRefusesAnotherSchema(t *testing.T) {
	dir := t.TempDir()
	d, err := Create(dir, Options{NoSync: true, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.update(func(tx *Txn) error { return tx.Set(keySchema, []byte("1")) }); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, Options{MinFree: -1})
	if err == nil || !strings.Contains(err.Error(), `store schema version "1", this build reads "`+SchemaVersion+`"`) {
		t.Fatalf("got %v, want a schema refusal", err)
	}
}
