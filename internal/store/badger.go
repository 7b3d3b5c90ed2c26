package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// The Badger engine: a data directory (or, for the store's own tests,
// Badger's in-memory mode).

type badgerEngine struct{ db *badger.DB }

func openBadger(dir string, o Options) (*badgerEngine, error) {
	path := filepath.Join(dir, "db")
	opts := badger.DefaultOptions(path).
		// A small-memory profile: pedigree's values are small and its working
		// set is the recent entries; Badger's defaults (5 x 64 MB memtables,
		// 256 MB block cache) would dominate the process.
		WithMemTableSize(8 << 20).
		WithNumMemtables(3).
		WithNumLevelZeroTables(3).
		WithNumLevelZeroTablesStall(8).
		WithBlockCacheSize(16 << 20).
		WithIndexCacheSize(8 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumCompactors(2).
		WithBaseTableSize(2 << 20).
		// No compression: decompressed blocks were another 32 MiB of heap,
		// and values here are small signed JSON that compresses little.
		WithCompression(options.None).
		WithSyncWrites(!o.NoSync).
		WithLogger(nil)
	// Tables of 2 MiB at every level: with the default multiplier the deep
	// levels' tables, and the buffers compaction builds them in, grow to
	// tens of MiB each (192 MiB of heap at 200k entries). 1 MiB tables
	// used no less memory and synced twice as many files.
	opts.TableSizeMultiplier = 1
	if o.badgerInMemory {
		opts = opts.WithDir("").WithValueDir("").WithInMemory(true)
	}
	db, err := badger.Open(opts)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("%s: %w", dir, ErrLocked)
		}
		if errors.Is(err, os.ErrPermission) || strings.Contains(err.Error(), "permission denied") {
			return nil, fmt.Errorf("data directory %s is not writable: %w", dir, err)
		}
		if errors.Is(err, syscall.EROFS) || strings.Contains(err.Error(), "read-only file system") {
			return nil, fmt.Errorf("data directory %s is on a read-only file system: %w", dir, err)
		}
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	return &badgerEngine{db: db}, nil
}

func (b *badgerEngine) close() error { return b.db.Close() }

func (b *badgerEngine) view(fn func(engineTxn) error) error {
	return b.db.View(func(t *badger.Txn) error { return fn(badgerTxn{t}) })
}

// maxRetries bounds the retries of a transaction that lost a conflict.
const maxRetries = 16

// update commits fn durably. A transaction that conflicts with a concurrent
// one is run again from the start, so fn must be free of side effects
// outside the transaction.
func (b *badgerEngine) update(fn func(engineTxn) error) error {
	for range maxRetries {
		err := b.db.Update(func(t *badger.Txn) error { return fn(badgerTxn{t}) })
		if errors.Is(err, badger.ErrConflict) {
			continue
		}
		return translate(err)
	}
	return ErrConflict
}

func translate(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, badger.ErrTxnTooBig):
		return fmt.Errorf("write too large for one transaction: %w", err)
	}
	return err
}

type badgerTxn struct{ t *badger.Txn }

func (t badgerTxn) get(key []byte) ([]byte, error) {
	it, err := t.t.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return it.ValueCopy(nil)
}

func (t badgerTxn) has(key []byte) (bool, error) {
	_, err := t.t.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// set: Badger keeps the slices until commit.
func (t badgerTxn) set(key, val []byte) error { return translate(t.t.Set(key, val)) }

func (t badgerTxn) delete(key []byte) error { return translate(t.t.Delete(key)) }

func (t badgerTxn) iterate(prefix []byte, withValues bool, fn func(key, val []byte) error) error {
	o := badger.DefaultIteratorOptions
	o.PrefetchValues = withValues
	o.PrefetchSize = 16
	o.Prefix = prefix
	it := t.t.NewIterator(o)
	defer it.Close()
	for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		var val []byte
		if withValues {
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			val = v
		}
		if err := fn(item.Key(), val); err != nil {
			return err
		}
	}
	return nil
}
