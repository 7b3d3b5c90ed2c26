//go:build crash

package crashtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/internal/hatch"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// TestDiskFull fills a small tmpfs until a write fails: the error must be
// returned (not a panic, not a silent loss), and after remounting with room
// every acknowledged entry must be there and verify must be clean. It needs
// root (mount); CI runs as root.
func TestDiskFull(t *testing.T) {
	mnt := mountTmpfs(t)
	dir := filepath.Join(mnt, "data")
	ctx := t.Context()
	op, _, _ := registry.GenerateSigner(nil)
	e, err := pedigree.Init(ctx, dir, 0.5, pedigree.WithOperatorSigner(op))
	if err != nil {
		t.Fatal(err)
	}
	s, _, _ := registry.GenerateSigner(nil)
	if err := e.Bootstrap().AddPrincipal(ctx, registry.Principal{ID: "user:a", Tier: registry.User, PublicKey: s.Public()}); err != nil {
		t.Fatal(err)
	}
	if err := e.Bootstrap().Freeze(ctx, op); err != nil {
		t.Fatal(err)
	}
	// Fill the filesystem until 4 MiB above the floor are left.
	filler := filepath.Join(mnt, "filler")
	free := freeBytes(t, mnt)
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=1M", fmt.Sprintf("count=%d", (free-store.DefaultMinFree)>>20-4)).CombinedOutput(); err != nil {
		t.Fatalf("dd: %v %s", err, out)
	}

	var acked []string
	content := []byte(strings.Repeat("x", 64<<10))
	var werr error
	for i := 0; i < 10000; i++ {
		n, err := e.Record(ctx, s, pedigree.Entry{Principal: "user:a", Content: append(content, byte(i), byte(i>>8)), StoreContent: true, Parents: []lineage.Parent{}})
		if err != nil {
			werr = err
			break
		}
		acked = append(acked, n.ID)
	}
	if werr == nil {
		t.Fatal("10,000 records of 64 KiB fit in the remaining space")
	}
	t.Logf("after %d entries: %v", len(acked), werr)
	if !errors.Is(werr, store.ErrDiskFull) || len(acked) == 0 {
		t.Fatalf("after %d entries: %v, want ErrDiskFull", len(acked), werr)
	}
	e.Close()
	os.Remove(filler)

	e, err = pedigree.Open(ctx, dir)
	if err != nil {
		t.Fatalf("reopen after the disk filled: %v", err)
	}
	defer e.Close()
	for _, id := range acked {
		if _, err := hatch.Graph(e).Node(id); err != nil {
			t.Fatalf("acknowledged entry %s is gone: %v", id[:12], err)
		}
	}
	r, err := e.Verify(ctx)
	if err != nil || !r.OK() {
		t.Fatalf("verify: %+v %v", r, err)
	}
	// And the store works again once there is room.
	if _, err := e.Record(ctx, s, pedigree.Entry{Principal: "user:a", Content: []byte("after"), Parents: []lineage.Parent{}}); err != nil {
		t.Fatalf("record after freeing space: %v", err)
	}
}

func freeBytes(t *testing.T, path string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// mountTmpfs mounts a 160 MiB tmpfs for the test, or skips it without root.
func mountTmpfs(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=160m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	return mnt
}

// TestReadOnlyFilesystem: a data directory on a filesystem remounted
// read-only is one clear sentence at open.
func TestReadOnlyFilesystem(t *testing.T) {
	mnt := mountTmpfs(t)
	dir := filepath.Join(mnt, "data")
	op, _, _ := registry.GenerateSigner(nil)
	e, err := pedigree.Init(t.Context(), dir, 0.5, pedigree.WithOperatorSigner(op))
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	if out, err := exec.Command("mount", "-o", "remount,ro", mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v %s", err, out)
	}
	_, err = pedigree.Open(t.Context(), dir)
	if err == nil || !strings.Contains(err.Error(), "read-only file system") {
		t.Fatalf("open on a read-only filesystem: %v", err)
	}
}
