package registry

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	ssldsse "github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/kv"
)

func p256(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// mixedRegistry is a frozen registry of an Ed25519 agent and a P-256
// approver, in a store the test can edit.
func mixedRegistry(t *testing.T) (kv.Store, *Signer, *ecdsa.PrivateKey) {
	t.Helper()
	db, err := store.Create("", store.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sp := db.Space(store.Registry)
	op, _, _ := GenerateSigner(nil)
	if err := Bootstrap(t.Context(), sp, 0.5, op.Public().(ed25519.PublicKey), time.Now()); err != nil {
		t.Fatal(err)
	}
	r, err := Load(sp)
	if err != nil {
		t.Fatal(err)
	}
	agent, _, _ := GenerateSigner(nil)
	alice := p256(t)
	if err := r.Add(t.Context(), Principal{ID: "agent:a", Tier: Internal, PublicKey: agent.Public()}); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(t.Context(), Principal{ID: "user:alice", Tier: User, PublicKey: &alice.PublicKey, Approver: true}); err != nil {
		t.Fatal(err)
	}
	if err := r.Freeze(t.Context(), op, time.Now()); err != nil {
		t.Fatal(err)
	}
	return sp, op, alice
}

func getRow(t *testing.T, db kv.Store, key string) []byte {
	t.Helper()
	var b []byte
	if err := db.View(func(tx kv.Txn) error {
		var err error
		b, err = tx.Get([]byte(key))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

func setRow(t *testing.T, db kv.Store, key string, v []byte) {
	t.Helper()
	if err := db.Commit(t.Context(), len(v), func(tx kv.Txn) error { return tx.Set([]byte(key), v) }); err != nil {
		t.Fatal(err)
	}
}

// TestP256Principal: a P-256 approver is registered with its algorithm,
// frozen with it, reloaded, and its signatures verify; an Ed25519 row is
// written as before P-256 existed.
func TestP256Principal(t *testing.T) {
	db, _, alice := mixedRegistry(t)
	if row := string(getRow(t, db, "p/user:alice")); !strings.Contains(row, `"algorithm":"ecdsa-p256"`) {
		t.Fatalf("the P-256 row does not name its algorithm: %s", row)
	}
	if row := string(getRow(t, db, "p/agent:a")); strings.Contains(row, "algorithm") {
		t.Fatalf("an Ed25519 row names an algorithm (it would not read as before): %s", row)
	}
	var fr freezeRow
	json.Unmarshal(getRow(t, db, "freeze"), &fr)
	if !bytes.Contains(fr.Manifest, []byte(`"id":"user:alice","tier":"user","key_sha256":"`+KeyFingerprint(&alice.PublicKey)+`","algorithm":"ecdsa-p256"`)) {
		t.Fatalf("the manifest does not cover the P-256 key and its algorithm: %s", fr.Manifest)
	}
	if bytes.Count(fr.Manifest, []byte("algorithm")) != 1 {
		t.Fatalf("the Ed25519 entry names an algorithm: %s", fr.Manifest)
	}
	r, err := Load(db)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Frozen() || !r.CanApprove("user:alice") {
		t.Fatal("the P-256 approver is not a frozen approver after reload")
	}
	v, p, err := r.Verifier("user:alice")
	if err != nil || !p.PublicKey.Equal(&alice.PublicKey) {
		t.Fatalf("verifier: %v", err)
	}
	msg := []byte("approve")
	sig, _ := ecdsa.SignASN1(rand.Reader, alice, sha256Sum(msg))
	if err := v.Verify(sig, msg); err != nil {
		t.Fatalf("a P-256 signature does not verify: %v", err)
	}
	if err := v.Verify(sig, []byte("approvf")); err == nil {
		t.Fatal("a P-256 signature verifies another message")
	}
}

// TestRowAlgorithmMustMatchKey: a row whose algorithm is not its key's is
// refused, both ways.
func TestRowAlgorithmMustMatchKey(t *testing.T) {
	for _, c := range []struct {
		key  string
		edit func(*principalRow)
	}{
		{"p/user:alice", func(r *principalRow) { r.Algorithm = "" }},
		{"p/agent:a", func(r *principalRow) { r.Algorithm = AlgECDSAP256 }},
		{"p/agent:a", func(r *principalRow) { r.Algorithm = AlgEd25519 }},
	} {
		db, _, _ := mixedRegistry(t)
		var pr principalRow
		json.Unmarshal(getRow(t, db, c.key), &pr)
		c.edit(&pr)
		row, _ := json.Marshal(pr)
		setRow(t, db, c.key, row)
		if _, err := Load(db); !errors.Is(err, ErrBadKey) {
			t.Errorf("%s edited to %s: Load = %v, want ErrBadKey", c.key, row, err)
		}
	}
}

// TestManifestAlgorithmIsChecked: a freeze record that the operator signed
// but that names another algorithm than the row's is a tamper, even with
// the same key fingerprint and a digest that matches.
func TestManifestAlgorithmIsChecked(t *testing.T) {
	db, op, _ := mixedRegistry(t)
	var fr freezeRow
	json.Unmarshal(getRow(t, db, "freeze"), &fr)
	var m manifest
	json.Unmarshal(fr.Manifest, &m)
	for i := range m.Principals {
		m.Principals[i].Algorithm = ""
	}
	m.Digest = digest(&m)
	fr.Manifest, _ = json.Marshal(m)
	fr.Signature, _ = op.Sign(fr.Manifest)
	b, _ := json.Marshal(fr)
	setRow(t, db, "freeze", b)
	_, err := Load(db)
	var te *TamperError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), `principal user:alice has key algorithm "ecdsa-p256", frozen as ""`) {
		t.Fatalf("Load = %v", err)
	}
}

// TestDigestCoversAlgorithm: the manifest digest changes with an entry's
// algorithm, and is the pre-P-256 digest for an Ed25519 entry.
func TestDigestCoversAlgorithm(t *testing.T) {
	m := manifest{Tau: 0.5, Principals: []manifestEntry{{ID: "user:a", Tier: User, Key: "k"}}}
	ed := digest(&m)
	m.Principals[0].Algorithm = AlgECDSAP256
	if digest(&m) == ed {
		t.Fatal("the digest does not cover the algorithm")
	}
	// An Ed25519 entry digests as before P-256: stores frozen then still open.
	m.Principals[0].Algorithm = ""
	h := sha256.New()
	fmt.Fprintf(h, "pedigree-registry-v2\ntau=0.5\nmax_approval_ttl=\noperator=\nmeta=\nuser:a\x00user\x00k\x00false\n")
	if digest(&m) != hex.EncodeToString(h.Sum(nil)) {
		t.Fatal("an Ed25519 entry's digest changed")
	}
}

func sha256Sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// TestAlgorithm: what a principal's key may be.
func TestAlgorithm(t *testing.T) {
	edPub, _, _ := ed25519.GenerateKey(nil)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 1024)
	var nilEC *ecdsa.PublicKey
	for _, c := range []struct {
		key  PublicKey
		want string
	}{
		{edPub, AlgEd25519},
		{&p256(t).PublicKey, AlgECDSAP256},
		{edPub[:31], ""},
		{&p384.PublicKey, ""},
		{nilEC, ""},
		{&rsaKey.PublicKey, ""},
		{nil, ""},
	} {
		got, err := Algorithm(c.key)
		if got != c.want || (c.want == "") != errors.Is(err, ErrBadKey) {
			t.Errorf("Algorithm(%T) = %q, %v; want %q", c.key, got, err, c.want)
		}
		if fp := KeyFingerprint(c.key); (fp == "") != (c.want == "") {
			t.Errorf("KeyFingerprint(%T) = %q", c.key, fp)
		}
		if _, err := newVerifier(c.key); (err == nil) != (c.want != "") {
			t.Errorf("newVerifier(%T) = %v", c.key, err)
		}
		if _, err := MarshalPrincipalKey(c.key); (err == nil) != (c.want != "") {
			t.Errorf("MarshalPrincipalKey(%T) = %v", c.key, err)
		}
		if c.key != nil && c.key != PublicKey(nilEC) && c.want == "" {
			if der, err := x509.MarshalPKIXPublicKey(c.key); err == nil {
				if _, err := ParsePrincipalKey(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})); !errors.Is(err, ErrBadKey) {
					t.Errorf("ParsePrincipalKey(%T) = %v", c.key, err)
				}
			}
		}
	}
	// A P-256 fingerprint is over the key's DER, an Ed25519 one over its raw bytes.
	if KeyFingerprint(edPub) != KeyFingerprint(ed25519.PublicKey(bytes.Clone(edPub))) {
		t.Fatal("fingerprint not stable")
	}
	db, err := store.Create("", store.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	op, _, _ := GenerateSigner(nil)
	Bootstrap(t.Context(), db.Space(store.Registry), 0.5, op.Public().(ed25519.PublicKey), time.Now())
	r, _ := Load(db.Space(store.Registry))
	if err := r.Add(t.Context(), Principal{ID: "user:x", Tier: User, PublicKey: &p384.PublicKey}); !errors.Is(err, ErrBadKey) {
		t.Fatalf("a P-384 key was registered: %v", err)
	}
	if err := r.Add(t.Context(), Principal{ID: "user:y", Tier: User}); !errors.Is(err, ErrBadKey) {
		t.Fatalf("no key was registered: %v", err)
	}
}

func p256Curve() elliptic.Curve { return elliptic.P256() }

func sha256Of(b []byte) []byte { return sha256Sum(b) }

// envelopeFor builds a DSSE envelope as SignEnvelope does, with sign.
func envelopeFor(t testing.TB, typ string, payload []byte, sign func([]byte) ([]byte, error)) []byte {
	sig, err := sign(ssldsse.PAE(typ, payload))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"payloadType": typ, "payload": payload,
		"signatures": []map[string]any{{"keyid": "", "sig": sig}}})
	return b
}
