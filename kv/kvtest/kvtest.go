package kvtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/pedigree-ai/pedigree/kv"
)

// Target is one fresh, empty store under test.
type Target struct {
	// A and B are two namespaces of the same store.
	A, B kv.Store
	// Commit runs fn in one durable transaction over the whole store, seen
	// through namespace A and namespace B.
	Commit func(ctx context.Context, fn func(a, b kv.Txn) error) error
}

// Run runs the suite; open is called once per test and must clean up
// after itself (t.Cleanup).
func Run(t *testing.T, open func(t *testing.T) Target) {
	tests := []struct {
		name string
		fn   func(*testing.T, Target)
	}{
		{"GetHasSetDelete", testGetHasSetDelete},
		{"IterateOrderAndPrefix", testIterate},
		{"ErrStop", testErrStop},
		{"ReadYourWrites", testReadYourWrites},
		{"SnapshotIsolation", testSnapshot},
		{"AtomicCommit", testAtomic},
		{"FailingWriteAmongConcurrentOnes", testFailingAmongMany},
		{"ReadOnlyView", testReadOnly},
		{"NamespacesIsolated", testNamespaces},
		{"GroupCommitSerialisable", testGroupCommit},
		{"CancelledContext", testCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func set(t *testing.T, s kv.Store, kvs ...string) {
	t.Helper()
	err := s.Commit(t.Context(), 0, func(tx kv.Txn) error {
		for i := 0; i < len(kvs); i += 2 {
			if err := tx.Set([]byte(kvs[i]), []byte(kvs[i+1])); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// get is the value at key, or "<none>".
func get(t *testing.T, tx kv.Txn, key string) string {
	t.Helper()
	v, err := tx.Get([]byte(key))
	if errors.Is(err, kv.ErrNotFound) {
		has, err := tx.Has([]byte(key))
		if err != nil || has {
			t.Fatalf("Has(%q) = %v, %v after Get said not found", key, has, err)
		}
		return "<none>"
	}
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	has, err := tx.Has([]byte(key))
	if err != nil || !has {
		t.Fatalf("Has(%q) = %v, %v after Get found it", key, has, err)
	}
	return string(v)
}

func view(t *testing.T, s kv.Store, key string) string {
	t.Helper()
	var v string
	if err := s.View(func(tx kv.Txn) error { v = get(t, tx, key); return nil }); err != nil {
		t.Fatal(err)
	}
	return v
}

// keys lists the keys under prefix (and their values, "k=v").
func keys(t *testing.T, tx kv.Txn, prefix string, withValues bool) []string {
	t.Helper()
	var out []string
	err := tx.Iterate([]byte(prefix), withValues, func(k, v []byte) error {
		if !bytes.HasPrefix(k, []byte(prefix)) {
			t.Errorf("Iterate(%q) gave %q, outside the prefix", prefix, k)
		}
		if withValues {
			out = append(out, string(k)+"="+string(v))
		} else {
			out = append(out, string(k))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func viewKeys(t *testing.T, s kv.Store, prefix string, withValues bool) []string {
	t.Helper()
	var out []string
	if err := s.View(func(tx kv.Txn) error { out = keys(t, tx, prefix, withValues); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func want(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

func testGetHasSetDelete(t *testing.T, s Target) {
	if v := view(t, s.A, "k"); v != "<none>" {
		t.Fatalf("empty store: k = %q", v)
	}
	set(t, s.A, "k", "v1", "empty", "")
	if v := view(t, s.A, "k"); v != "v1" {
		t.Fatalf("k = %q, want v1", v)
	}
	if v := view(t, s.A, "empty"); v != "" {
		t.Fatalf("a key set to an empty value: %q, want it stored and empty", v)
	}
	// Get returns a copy: changing it changes nothing stored.
	err := s.A.View(func(tx kv.Txn) error {
		v, err := tx.Get([]byte("k"))
		if err != nil {
			return err
		}
		copy(v, "XX")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v := view(t, s.A, "k"); v != "v1" {
		t.Fatalf("after changing a returned value: k = %q", v)
	}
	// Set overwrites; the slice given to Set may be reused after commit.
	buf := []byte("v2")
	if err := s.A.Commit(t.Context(), 0, func(tx kv.Txn) error { return tx.Set([]byte("k"), buf) }); err != nil {
		t.Fatal(err)
	}
	copy(buf, "ZZ")
	if v := view(t, s.A, "k"); v != "v2" {
		t.Fatalf("k = %q, want v2", v)
	}
	if err := s.A.Commit(t.Context(), 0, func(tx kv.Txn) error { return tx.Delete([]byte("k")) }); err != nil {
		t.Fatal(err)
	}
	if v := view(t, s.A, "k"); v != "<none>" {
		t.Fatalf("deleted k = %q", v)
	}
	// Deleting a key that is not there is not an error.
	if err := s.A.Commit(t.Context(), 0, func(tx kv.Txn) error { return tx.Delete([]byte("never")) }); err != nil {
		t.Fatalf("delete of an absent key: %v", err)
	}
}

func testIterate(t *testing.T, s Target) {
	all := []string{"a", "a/", "a/1", "a/1/x", "a/2", "a0", "a\x00", "a\xff", "ab", "b", "\xff\xff"}
	shuffled := slices.Clone(all)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	var kvs []string
	for _, k := range shuffled {
		kvs = append(kvs, k, "v"+k)
	}
	set(t, s.A, kvs...)
	sorted := slices.Clone(all)
	slices.Sort(sorted) // byte order
	want(t, "every key", viewKeys(t, s.A, "", false), sorted)
	want(t, `prefix "a/"`, viewKeys(t, s.A, "a/", false), []string{"a/", "a/1", "a/1/x", "a/2"})
	want(t, `prefix "a/1"`, viewKeys(t, s.A, "a/1", true), []string{"a/1=va/1", "a/1/x=va/1/x"})
	want(t, `prefix "a\xff"`, viewKeys(t, s.A, "a\xff", false), []string{"a\xff"})
	want(t, `prefix "\xff"`, viewKeys(t, s.A, "\xff", false), []string{"\xff\xff"})
	want(t, `prefix "c"`, viewKeys(t, s.A, "c", false), nil)
	want(t, `prefix "a/2" and more`, viewKeys(t, s.A, "a/2/", false), nil)
	// A callback may keep nothing it is given, but what it copies is the
	// row: the values come with the keys.
	for _, kv := range viewKeys(t, s.A, "", true) {
		k, v, _ := bytes.Cut([]byte(kv), []byte("="))
		if string(v) != "v"+string(k) {
			t.Errorf("row %q has value %q", k, v)
		}
	}
}

func testErrStop(t *testing.T, s Target) {
	set(t, s.A, "k1", "1", "k2", "2", "k3", "3")
	var seen []string
	boom := errors.New("boom")
	err := s.A.View(func(tx kv.Txn) error {
		err := tx.Iterate([]byte("k"), false, func(k, _ []byte) error {
			seen = append(seen, string(k))
			if len(seen) == 2 {
				return kv.ErrStop
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("an Iterate ended by ErrStop returned %w", err)
		}
		err = tx.Iterate([]byte("k"), false, func([]byte, []byte) error { return boom })
		if !errors.Is(err, boom) {
			return fmt.Errorf("an Iterate ended by an error returned %v, want that error", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want(t, "rows before ErrStop", seen, []string{"k1", "k2"})
}

func testReadYourWrites(t *testing.T, s Target) {
	set(t, s.A, "k/1", "old1", "k/2", "old2", "k/4", "old4", "k/6", "old6")
	err := s.A.Commit(t.Context(), 0, func(tx kv.Txn) error {
		for _, w := range [][2]string{{"k/3", "new3"}, {"k/1", "new1"}, {"k/0", "new0"}, {"k/9", "new9"}} {
			if err := tx.Set([]byte(w[0]), []byte(w[1])); err != nil {
				return err
			}
		}
		if err := tx.Delete([]byte("k/2")); err != nil {
			return err
		}
		// A key written then deleted, and one deleted then written again.
		if err := tx.Set([]byte("k/5"), []byte("gone")); err != nil {
			return err
		}
		if err := tx.Delete([]byte("k/5")); err != nil {
			return err
		}
		if err := tx.Delete([]byte("k/4")); err != nil {
			return err
		}
		if err := tx.Set([]byte("k/4"), []byte("again4")); err != nil {
			return err
		}
		if v := get(t, tx, "k/1"); v != "new1" {
			t.Errorf("own overwrite: k/1 = %q", v)
		}
		if v := get(t, tx, "k/2"); v != "<none>" {
			t.Errorf("own delete: k/2 = %q", v)
		}
		if v := get(t, tx, "k/3"); v != "new3" {
			t.Errorf("own write: k/3 = %q", v)
		}
		want(t, "Iterate inside the transaction", keys(t, tx, "k/", true),
			[]string{"k/0=new0", "k/1=new1", "k/3=new3", "k/4=again4", "k/6=old6", "k/9=new9"})
		// Stop early in the merged walk, at a buffered row.
		var first []string
		err := tx.Iterate([]byte("k/"), false, func(k, _ []byte) error {
			first = append(first, string(k))
			if len(first) == 3 {
				return kv.ErrStop
			}
			return nil
		})
		want(t, "merged walk stopped at the third row", first, []string{"k/0", "k/1", "k/3"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want(t, "after commit", viewKeys(t, s.A, "k/", true), []string{"k/0=new0", "k/1=new1", "k/3=new3", "k/4=again4", "k/6=old6", "k/9=new9"})
}

func testSnapshot(t *testing.T, s Target) {
	set(t, s.A, "k", "v1", "x/1", "1")
	err := s.A.View(func(tx kv.Txn) error {
		if v := get(t, tx, "k"); v != "v1" {
			t.Fatalf("k = %q", v)
		}
		// A commit lands while the view is open.
		done := make(chan error, 1)
		go func() {
			done <- s.A.Commit(context.Background(), 0, func(w kv.Txn) error {
				if err := w.Set([]byte("k"), []byte("v2")); err != nil {
					return err
				}
				if err := w.Delete([]byte("x/1")); err != nil {
					return err
				}
				return w.Set([]byte("x/2"), []byte("2"))
			})
		}()
		if err := <-done; err != nil {
			return err
		}
		if v := get(t, tx, "k"); v != "v1" {
			t.Errorf("inside the view after a concurrent commit: k = %q, want v1", v)
		}
		want(t, "Iterate inside the view after a concurrent commit", keys(t, tx, "x/", false), []string{"x/1"})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v := view(t, s.A, "k"); v != "v2" {
		t.Errorf("a new view: k = %q, want v2", v)
	}
	want(t, "a new view's rows", viewKeys(t, s.A, "x/", false), []string{"x/2"})
}

func testAtomic(t *testing.T, s Target) {
	set(t, s.A, "keep", "1")
	boom := errors.New("boom")
	err := s.A.Commit(t.Context(), 0, func(tx kv.Txn) error {
		for i := range 50 {
			if err := tx.Set(fmt.Appendf(nil, "half/%02d", i), []byte("x")); err != nil {
				return err
			}
		}
		if err := tx.Delete([]byte("keep")); err != nil {
			return err
		}
		return fmt.Errorf("half-way: %w", boom)
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Commit of a failing fn returned %v, want its error", err)
	}
	want(t, "rows of the failed commit", viewKeys(t, s.A, "half/", false), nil)
	if v := view(t, s.A, "keep"); v != "1" {
		t.Fatalf("a delete of the failed commit took effect: keep = %q", v)
	}
	// The same across namespaces, in one transaction.
	err = s.Commit(t.Context(), func(a, b kv.Txn) error {
		if err := a.Set([]byte("both"), []byte("a")); err != nil {
			return err
		}
		if err := b.Set([]byte("both"), []byte("b")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
	if view(t, s.A, "both") != "<none>" || view(t, s.B, "both") != "<none>" {
		t.Fatal("a failed commit over two namespaces left rows")
	}
}

func testFailingAmongMany(t *testing.T, s Target) {
	boom := errors.New("boom")
	const n = 24
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = s.A.Commit(context.Background(), 8, func(tx kv.Txn) error {
				if err := tx.Set(fmt.Appendf(nil, "w/%02d", i), []byte("x")); err != nil {
					return err
				}
				if i%3 == 0 {
					return boom
				}
				return nil
			})
		})
	}
	wg.Wait()
	var wantKeys []string
	for i, err := range errs {
		switch {
		case i%3 == 0 && !errors.Is(err, boom):
			t.Errorf("write %d failed its fn but Commit returned %v", i, err)
		case i%3 != 0 && err != nil:
			t.Errorf("write %d failed because another did: %v", i, err)
		}
		if i%3 != 0 {
			wantKeys = append(wantKeys, fmt.Sprintf("w/%02d", i))
		}
	}
	want(t, "stored writes", viewKeys(t, s.A, "w/", false), wantKeys)
}

func testReadOnly(t *testing.T, s Target) {
	err := s.A.View(func(tx kv.Txn) error {
		if tx.Set([]byte("k"), []byte("v")) == nil {
			t.Error("Set in a View succeeded")
		}
		if tx.Delete([]byte("k")) == nil {
			t.Error("Delete in a View succeeded")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v := view(t, s.A, "k"); v != "<none>" {
		t.Fatalf("a View wrote k = %q", v)
	}
}

func testNamespaces(t *testing.T, s Target) {
	set(t, s.A, "k", "in A", "a-only", "1")
	set(t, s.B, "k", "in B")
	if v := view(t, s.A, "k"); v != "in A" {
		t.Errorf("A's k = %q", v)
	}
	if v := view(t, s.B, "k"); v != "in B" {
		t.Errorf("B's k = %q", v)
	}
	want(t, "B's rows", viewKeys(t, s.B, "", false), []string{"k"})
	want(t, "A's rows", viewKeys(t, s.A, "", false), []string{"a-only", "k"})
	err := s.Commit(t.Context(), func(a, b kv.Txn) error {
		if v := get(t, b, "a-only"); v != "<none>" {
			t.Errorf("B sees A's row: %q", v)
		}
		if err := b.Delete([]byte("k")); err != nil {
			return err
		}
		if v := get(t, a, "k"); v != "in A" {
			t.Errorf("B's delete reached A: k = %q", v)
		}
		if err := a.Set([]byte("new"), []byte("a")); err != nil {
			return err
		}
		want(t, "B's rows inside the commit", keys(t, b, "", false), nil)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want(t, "A after", viewKeys(t, s.A, "", false), []string{"a-only", "k", "new"})
	want(t, "B after", viewKeys(t, s.B, "", false), nil)
}

// testGroupCommit: many writers each read a counter and write it plus one,
// and write a key of their own. Commits may share a transaction, but each
// fn must see the writes of those before it: the counter ends at the
// number of commits.
func testGroupCommit(t *testing.T, s Target) {
	const writers, each = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				errs <- s.A.Commit(context.Background(), 16, func(tx kv.Txn) error {
					n := 0
					v, err := tx.Get([]byte("counter"))
					switch {
					case errors.Is(err, kv.ErrNotFound):
					case err != nil:
						return err
					default:
						if _, err := fmt.Sscan(string(v), &n); err != nil {
							return err
						}
					}
					if err := tx.Set([]byte("counter"), fmt.Append(nil, n+1)); err != nil {
						return err
					}
					return tx.Set(fmt.Appendf(nil, "own/%02d/%02d", w, i), []byte("x"))
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if v := view(t, s.A, "counter"); v != fmt.Sprint(writers*each) {
		t.Fatalf("counter = %s after %d commits: a commit lost another's write", v, writers*each)
	}
	if got := len(viewKeys(t, s.A, "own/", false)); got != writers*each {
		t.Fatalf("%d own keys, want %d", got, writers*each)
	}
}

// testCancelled: a Commit whose context is already cancelled either stores
// its write and returns nil, or returns the context's error and stores
// nothing; never one without the other.
func testCancelled(t *testing.T, s Target) {
	for i := range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		key := fmt.Sprintf("c/%02d", i)
		err := s.A.Commit(ctx, 0, func(tx kv.Txn) error { return tx.Set([]byte(key), []byte("x")) })
		stored := view(t, s.A, key) != "<none>"
		switch {
		case err == nil && !stored:
			t.Fatalf("Commit returned nil and %s is not stored", key)
		case err != nil && stored:
			t.Fatalf("Commit returned %v and %s is stored", err, key)
		case err != nil && !errors.Is(err, context.Canceled):
			t.Fatalf("Commit with a cancelled context: %v", err)
		}
	}
}
