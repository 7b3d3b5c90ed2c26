package tlog_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/tlog"
)

// TestCheckSignedByEngineKeys: a checkpoint kept elsewhere counts when the
// operator or an engine key the log was given signs it; every key given
// counts, and a key set again replaces the ones before.
func TestCheckSignedByEngineKeys(t *testing.T) {
	signer := func() (*registry.Signer, ed25519.PublicKey) {
		s, priv, err := registry.GenerateSigner(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return s, priv.Public().(ed25519.PublicKey)
	}
	op, opPub := signer()
	e1, e1Pub := signer()
	e2, e2Pub := signer()
	other, _ := signer()
	l, err := tlog.New(nil, opPub)
	if err != nil {
		t.Fatal(err)
	}
	root := "00000000000000000000000000000000000000000000000000000000000000aa"
	cp := func(s *registry.Signer) *tlog.Checkpoint {
		c, err := tlog.SignCheckpoint(s, 7, root, time.Unix(1, 0))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	check := func(what string, c *tlog.Checkpoint, ok bool) {
		t.Helper()
		err := l.CheckSigned(c)
		if ok && err != nil {
			t.Errorf("%s: refused: %v", what, err)
		}
		if !ok && !errors.Is(err, registry.ErrBadSignature) {
			t.Errorf("%s: got %v, want ErrBadSignature", what, err)
		}
	}
	check("the operator's, no engine key", cp(op), true)
	check("an engine's, before its key is given", cp(e1), false)
	if err := l.SetEngineKeys([]ed25519.PublicKey{e1Pub, e2Pub}); err != nil {
		t.Fatal(err)
	}
	check("the first engine's", cp(e1), true)
	check("the second engine's", cp(e2), true)
	check("the operator's, beside engine keys", cp(op), true)
	check("an unknown key's", cp(other), false)
	if err := l.SetEngineKeys([]ed25519.PublicKey{e2Pub}); err != nil {
		t.Fatal(err)
	}
	check("the first engine's, after its key was taken out", cp(e1), false)
	check("the second engine's, still given", cp(e2), true)
	if err := l.SetEngineKeys([]ed25519.PublicKey{e1Pub, ed25519.PublicKey("short")}); err == nil {
		t.Error("a malformed engine key was taken")
	}
}
