package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/kv"
)

// SchemaVersion is the layout of keys this build reads and writes. A store
// written by another version is refused at open, so that a later layout can
// migrate it instead of misreading it.
const SchemaVersion = "5"

var (
	// ErrNotFound is returned by Get for a key that does not exist: the
	// contract's kv.ErrNotFound.
	ErrNotFound = kv.ErrNotFound
	// ErrLocked means another process holds the data directory.
	ErrLocked = errors.New("the data directory is in use by another pedigree process")
	// ErrNotInitialized means the directory holds no pedigree store yet.
	ErrNotInitialized = errors.New("no pedigree store here")
	// ErrExists means init was asked to create a store that is already there.
	ErrExists = errors.New("a pedigree store already exists here")
	// ErrConflict means a transaction lost a race with a concurrent one and
	// was retried until the retry budget ran out.
	ErrConflict = errors.New("transaction conflict")
	// ErrDiskFull means the data directory's filesystem is nearly full and
	// the write was refused, with nothing stored.
	ErrDiskFull = errors.New("not enough free disk space")
)

// DefaultMinFree is the free space below which writes are refused. Badger
// writes through memory-mapped files, and on a full disk the kernel kills
// the process with SIGBUS instead of returning an error (seen in
// TestDiskFull), so pedigree stops well before: a memtable or a compaction
// needs tens of megabytes.
const DefaultMinFree = 64 << 20

var keySchema = []byte(nsMeta + "schema")

// DB is an open store.
type DB struct {
	kv        engine
	dir       string
	space     *spaceCheck
	committer *committer
}

// Options tune how a store is opened.
type Options struct {
	// InMemory keeps everything in memory (NewInMemory, replays, tests),
	// in a B-tree (memory.go) instead of Badger: the same contract and the
	// same committer, without a directory, fsync or transaction size limit.
	InMemory bool
	// badgerInMemory, with InMemory, uses Badger's own in-memory mode
	// instead: only the store's tests ask for it, to hold both engines to
	// one conformance suite.
	badgerInMemory bool
	// NoSync turns off fsync on commit. Only for throwaway stores; the engine
	// acknowledges a write as durable only when it is synced.
	NoSync bool
	// MinFree is the free space (bytes) below which writes are refused;
	// 0 means DefaultMinFree, a negative value turns the check off.
	MinFree int64
}

// Exists says whether dir holds a store (on disk).
func Exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "db", "MANIFEST"))
	return err == nil
}

// Create makes a new store in dir (which may not hold one already) and writes
// the schema version.
func Create(dir string, o Options) (*DB, error) {
	if !o.InMemory {
		if err := checkDir(dir, true); err != nil {
			return nil, err
		}
		if Exists(dir) {
			return nil, fmt.Errorf("%s: %w", dir, ErrExists)
		}
	}
	d, err := open(dir, o)
	if err != nil {
		return nil, err
	}
	err = d.update(func(t *Txn) error {
		if _, err := t.Get(keySchema); err == nil {
			return fmt.Errorf("%s: %w", dir, ErrExists)
		}
		return t.Set(keySchema, []byte(SchemaVersion))
	})
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Open opens an existing store and checks its schema version.
func Open(dir string, o Options) (*DB, error) {
	if !o.InMemory {
		if err := checkDir(dir, false); err != nil {
			return nil, err
		}
		if _, err := os.Stat(filepath.Join(dir, "db", "MANIFEST")); err != nil {
			return nil, fmt.Errorf("%s: %w", dir, ErrNotInitialized)
		}
		// Badger follows links: a store file that is one would have it
		// write somewhere else.
		if err := safefile.CheckTree(dir, "db"); err != nil {
			return nil, fmt.Errorf("refusing the store: %w", err)
		}
	}
	d, err := open(dir, o)
	if err != nil {
		return nil, err
	}
	err = d.View(func(t *Txn) error {
		v, err := t.Get(keySchema)
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("%s: %w", dir, ErrNotInitialized)
		}
		if err != nil {
			return err
		}
		if string(v) != SchemaVersion {
			return fmt.Errorf("%s: store schema version %q, this build reads %q", dir, v, SchemaVersion)
		}
		return nil
	})
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func checkDir(dir string, create bool) error {
	if dir == "" {
		return errors.New("no data directory given")
	}
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		return fmt.Errorf("data directory %s is a file, not a directory", dir)
	case errors.Is(err, os.ErrNotExist) && create:
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create data directory: %w", err)
		}
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s: %w", dir, ErrNotInitialized)
	case err != nil:
		return fmt.Errorf("data directory: %w", err)
	}
	if create {
		const probe = ".pedigree-write-probe"
		if err := safefile.Create(dir, probe, nil, 0o600); err != nil {
			return fmt.Errorf("data directory %s is not writable: %w", dir, err)
		}
		safefile.Remove(dir, probe, safefile.Regular)
	}
	return nil
}

func open(dir string, o Options) (*DB, error) {
	d := &DB{dir: dir}
	if o.InMemory && !o.badgerInMemory {
		d.kv = newMemEngine()
	} else {
		b, err := openBadger(dir, o)
		if err != nil {
			return nil, err
		}
		d.kv = b
	}
	if !o.InMemory && o.MinFree >= 0 {
		min := o.MinFree
		if min == 0 {
			min = DefaultMinFree
		}
		d.space = &spaceCheck{dir: dir, min: min}
	}
	d.committer = newCommitter(d)
	return d, nil
}

// Dir is the data directory ("" for an in-memory store).
func (d *DB) Dir() string { return d.dir }

// Close answers every write handed to the committer, then closes Badger.
func (d *DB) Close() error {
	d.committer.close()
	return d.kv.close()
}

// View runs fn in a read-only transaction over the whole key space.
func (d *DB) View(fn func(*Txn) error) error {
	return d.kv.view(func(t engineTxn) error { return fn(&Txn{t: t}) })
}

// Commit runs fn durably through the group committer (see commit.go),
// batched with whatever else is waiting: the one write path of the store.
func (d *DB) Commit(ctx context.Context, size int, fn func(*Txn) error) error {
	return d.committer.commit(ctx, fn, size)
}

// update runs fn in a read-write transaction and commits it durably. A
// transaction that conflicts with a concurrent one may be run again from
// the start, so fn must be free of side effects outside the transaction.
// Only Create and the committer call it.
func (d *DB) update(fn func(*Txn) error) error {
	if err := d.space.ok(); err != nil {
		return err
	}
	return d.kv.update(func(t engineTxn) error { return fn(&Txn{t: t}) })
}

// engine is a key-value engine behind the store: Badger (badger.go) or the
// in-memory B-tree (memory.go). Its keys are whole: namespaces are the
// Txn's business.
type engine interface {
	view(fn func(engineTxn) error) error
	// update commits fn's writes durably, all or none.
	update(fn func(engineTxn) error) error
	close() error
}

// engineTxn is one engine's transaction. get returns a copy or ErrNotFound;
// iterate returns fn's error as it is (ErrStop included).
type engineTxn interface {
	get(key []byte) ([]byte, error)
	has(key []byte) (bool, error)
	set(key, val []byte) error
	delete(key []byte) error
	iterate(prefix []byte, withValues bool, fn func(key, val []byte) error) error
}

// Txn is a transaction, seen through a namespace: its keys are relative to
// the namespace's prefix (none for the whole key space).
type Txn struct {
	t      engineTxn
	prefix []byte
}

var _ kv.Txn = (*Txn)(nil)

// In is the same transaction seen through namespace ns (see doc.go): an
// owner handed it reads and writes only its own rows.
func (t *Txn) In(ns Namespace) *Txn {
	return &Txn{t: t.t, prefix: append(append([]byte(nil), t.prefix...), ns...)}
}

func (t *Txn) key(k []byte) []byte {
	if len(t.prefix) == 0 {
		return k
	}
	return append(append(make([]byte, 0, len(t.prefix)+len(k)), t.prefix...), k...)
}

// Get returns a copy of the value at key, or ErrNotFound.
func (t *Txn) Get(key []byte) ([]byte, error) { return t.t.get(t.key(key)) }

// Has reports whether key exists.
func (t *Txn) Has(key []byte) (bool, error) { return t.t.has(t.key(key)) }

// Set writes key. The engine may keep the slices until commit: do not
// reuse them.
func (t *Txn) Set(key, val []byte) error { return t.t.set(t.key(key), val) }

// Delete removes key.
func (t *Txn) Delete(key []byte) error { return t.t.delete(t.key(key)) }

// Iterate calls fn for each key with the given prefix, in key order. The
// slices are valid only during the call and must not be changed. Returning
// ErrStop ends the walk.
func (t *Txn) Iterate(prefix []byte, withValues bool, fn func(key, val []byte) error) error {
	err := t.t.iterate(t.key(prefix), withValues, func(k, v []byte) error { return fn(k[len(t.prefix):], v) })
	if errors.Is(err, ErrStop) {
		return nil
	}
	return err
}

// ErrStop ends an Iterate early without error: the contract's kv.ErrStop.
var ErrStop = kv.ErrStop

// spaceCheck refuses writes when the filesystem is nearly full. statfs is
// cached briefly: it sits in front of every write.
type spaceCheck struct {
	dir string
	min int64

	mu      sync.Mutex
	checked time.Time
	free    int64
	err     error
}

const spaceCheckEvery = 100 * time.Millisecond

func (s *spaceCheck) ok() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := time.Now(); now.Sub(s.checked) > spaceCheckEvery {
		var st syscall.Statfs_t
		if err := syscall.Statfs(s.dir, &st); err != nil {
			s.err = fmt.Errorf("check free space in %s: %w", s.dir, err)
		} else {
			s.free, s.err = int64(st.Bavail)*int64(st.Bsize), nil
		}
		s.checked = now
	}
	if s.err != nil {
		return s.err
	}
	if s.free < s.min {
		return fmt.Errorf("%w in %s: %d MiB free, pedigree refuses to write below %d MiB; nothing was stored", ErrDiskFull, s.dir, s.free>>20, s.min>>20)
	}
	return nil
}
