package registry_test

import (
	"crypto/ecdsa"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/testkit/kmstest"
)

// TestPKCS11Signer: a P-256 key made in a softhsm2 token signs entries'
// envelopes that verify in process; the PIN may come from a file, an
// environment variable or the URI; the key may be named by label or id.
func TestPKCS11Signer(t *testing.T) {
	tk := kmstest.SoftHSM(t, "pedigree")
	ref := tk.CreateKey(t, "alice")
	s, err := registry.OpenSigner(t.Context(), ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Public().(*ecdsa.PublicKey); !ok {
		t.Fatalf("a PKCS#11 key is %T", s.Public())
	}
	if alg, _ := registry.Algorithm(s.Public()); alg != registry.AlgECDSAP256 {
		t.Fatalf("algorithm %s", alg)
	}
	env, err := s.SignEnvelope("application/test", []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := registry.NewVerifier(s.Public())
	if p, err := v.VerifyEnvelope(env, "application/test"); err != nil || string(p) != `{"a":1}` {
		t.Fatalf("envelope: %v", err)
	}
	if _, err := s.Ed25519(); !errors.Is(err, registry.ErrBadKey) {
		t.Fatal("a PKCS#11 P-256 key passed as an operator key")
	}

	// The same key through an environment variable's PIN, and a literal.
	t.Setenv("ALICE_PIN", tk.PIN)
	for _, other := range []string{
		strings.Replace(ref, "pin-source=file:"+tk.PINFile, "pin-source=env:ALICE_PIN", 1),
		strings.Replace(ref, "pin-source=file:"+tk.PINFile, "pin-value="+tk.PIN, 1),
		strings.Replace(ref, "pin-source=file:"+tk.PINFile, "pin-source=file://"+tk.PINFile, 1),
	} {
		o, err := registry.OpenSigner(t.Context(), other, 0)
		if err != nil || !o.Public().Equal(s.Public()) {
			t.Fatalf("%s: %v", registry.DisplayRef(other), err)
		}
	}

	// By CKA_ID alone (percent-encoded bytes), a key made with one.
	byID := "pkcs11:token=pedigree;id=%01%ff%20?module-path=" + tk.Module + "&pin-source=file:" + tk.PINFile
	pub, err := registry.CreateKMSKey(t.Context(), strings.Replace(byID, "id=", "object=bob;id=", 1), registry.AlgECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	bob, err := registry.OpenSigner(t.Context(), byID, 0)
	if err != nil || !bob.Public().Equal(pub) || bob.Public().Equal(s.Public()) {
		t.Fatalf("by id: %v", err)
	}
	if _, err := bob.Sign([]byte("x")); err != nil {
		t.Fatal(err)
	}

	// A label two key pairs share names neither.
	if _, err := registry.CreateKMSKey(t.Context(), strings.Replace(ref, "object=alice", "object=alice;id=%02", 1), registry.AlgECDSAP256); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.OpenSigner(t.Context(), ref, 0); !errors.Is(err, registry.ErrKMS) || !strings.Contains(err.Error(), "holds 2 key pairs") {
		t.Fatalf("an ambiguous label: %v", err)
	}

	// Closed (as when a command ends), a signer fails rather than signs.
	registry.ClosePKCS11()
	if _, err := s.Sign([]byte("x")); !errors.Is(err, registry.ErrKMS) {
		t.Fatalf("a closed token signed: %v", err)
	}
}

// TestPKCS11Refused: a wrong PIN, a token or key that is not there, a
// module that is not one, a PIN file others may read: each is its own
// error, and none quotes a PIN.
func TestPKCS11Refused(t *testing.T) {
	tk := kmstest.SoftHSM(t, "pedigree")
	ref := tk.CreateKey(t, "alice")
	swap := func(from, to string) string { return strings.Replace(ref, from, to, 1) }
	const wrong = "0000-not-the-pin"
	for _, c := range []struct {
		name, ref, want string
		is              error
	}{
		{"wrong PIN", swap("pin-source=file:"+tk.PINFile, "pin-value="+wrong), `token "pedigree" refused the PIN (CKR_PIN_INCORRECT)`, registry.ErrKMS},
		{"no such token", swap("token=pedigree", "token=nosuch"), `has no token "nosuch"`, registry.ErrKMS},
		{"no such key", swap("object=alice", "object=bob"), `token "pedigree" holds no key pair with object="bob"`, registry.ErrKMS},
		{"no such module", swap(tk.Module, "/nonexistent/libpkcs11.so"), "/nonexistent/libpkcs11.so", registry.ErrKMS},
		{"not a module", swap(tk.Module, tk.PINFile), "is not a PKCS#11 module that loads", registry.ErrKMS},
		{"unset PIN variable", swap("pin-source=file:"+tk.PINFile, "pin-source=env:PEDIGREE_TEST_NO_SUCH_PIN"), "$PEDIGREE_TEST_NO_SUCH_PIN is not set", registry.ErrBadKey},
		{"missing PIN file", swap(tk.PINFile, tk.PINFile+".missing"), "pin-source", registry.ErrBadKey},
	} {
		_, err := registry.OpenSigner(t.Context(), c.ref, 0)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
		if err != nil && strings.Contains(err.Error(), wrong) {
			t.Errorf("%s: the error quotes the PIN: %v", c.name, err)
		}
	}
	loose := filepath.Join(t.TempDir(), "pin")
	os.WriteFile(loose, []byte(tk.PIN), 0o644)
	if _, err := registry.OpenSigner(t.Context(), swap(tk.PINFile, loose), 0); !errors.Is(err, registry.ErrKeyFileMode) {
		t.Errorf("a PIN file others may read: %v", err)
	}

	// Once this process is logged in to the token, the module would take
	// any PIN (CKR_USER_ALREADY_LOGGED_IN): another PIN is refused here.
	if _, err := registry.OpenSigner(t.Context(), ref, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.OpenSigner(t.Context(), swap("pin-source=file:"+tk.PINFile, "pin-value="+wrong), 0); !errors.Is(err, registry.ErrKMS) || !strings.Contains(err.Error(), "another PIN") {
		t.Fatalf("a wrong PIN after a right one: %v", err)
	}
}

// TestPKCS11RefSyntax: what RFC 7512 says and this reader does not
// enforce is refused, before any module is loaded.
func TestPKCS11RefSyntax(t *testing.T) {
	pinFile := filepath.Join(t.TempDir(), "pin")
	os.WriteFile(pinFile, []byte("1234\r\n"), 0o600)
	t.Setenv("PEDIGREE_TEST_PIN", "5678")
	const m = "?module-path=/usr/lib/softhsm/libsofthsm2.so"
	for ref, pin := range map[string]string{
		"pkcs11:token=t;object=k" + m + "&pin-value=12%2034":                               "12 34",
		"pkcs11:serial=0a1b;id=%01%02" + m + "&pin-source=file:" + pinFile:                 "1234",
		"pkcs11:slot-id=3;object=k;type=private" + m + "&pin-source=env:PEDIGREE_TEST_PIN": "5678",
	} {
		got, err := registry.ParsePKCS11Ref(ref)
		if err != nil || got != pin {
			t.Errorf("%s: pin %q, %v", ref, got, err)
		}
	}
	for ref, want := range map[string]string{
		"pkcs11:object=k" + m + "&pin-value=1":                              "exactly one of token=",
		"pkcs11:token=t;serial=s;object=k" + m + "&pin-value=1":             "exactly one of token=",
		"pkcs11:token=t" + m + "&pin-value=1":                               "object=LABEL or id=",
		"pkcs11:token=t;object=k?pin-value=1":                               "module-path= is required",
		"pkcs11:token=t;object=k?module-path=libsofthsm2.so&pin-value=1":    "not an absolute path",
		"pkcs11:token=t;object=k" + m:                                       "no PIN",
		"pkcs11:token=t;object=k" + m + "&pin-value=1&pin-source=env:X":     "not both",
		"pkcs11:token=t;object=k;manufacturer=SoftHSM" + m + "&pin-value=1": "manufacturer= is not supported",
		"pkcs11:token=t;object=k" + m + "&module-name=softhsm2&pin-value=1": "module-name= is not supported",
		"pkcs11:token=t;token=u;object=k" + m + "&pin-value=1":              "token= is given twice",
		"pkcs11:token=t;object=k" + m + "&pin-value=12%zz34":                "pin-value= is not percent-encoded",
		"pkcs11:token=t;object=k%zz" + m + "&pin-value=1":                   "object=",
		"pkcs11:token=t;object=k;type=public" + m + "&pin-value=1":          "type=private",
		"pkcs11:slot-id=x;object=k" + m + "&pin-value=1":                    "not a slot number",
		"pkcs11:token=t;object" + m + "&pin-value=1":                        "not NAME=VALUE",
		"pkcs11:token=t;object=k" + m + "&pin-source=file://host/pin":       "not a local file",
		"pkcs11:token=t;object=k" + m + "&pin-source=https://x/pin":         "want file:PATH or env:NAME",
		"pkcs11:token=t;object=k" + m + "&pin-source=vault:pin":             "want file:PATH or env:NAME",
	} {
		_, err := registry.ParsePKCS11Ref(ref)
		if !errors.Is(err, registry.ErrBadKey) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", ref, err)
		}
	}
	if !registry.IsKMSRef("pkcs11:token=t;object=k") || registry.IsKMSRef("./pkcs11:token=t") {
		t.Error("IsKMSRef does not tell a pkcs11: URI from a file")
	}
}

func TestDisplayRef(t *testing.T) {
	for ref, want := range map[string]string{
		"pkcs11:token=t;object=k?module-path=/m.so&pin-value=1234":     "pkcs11:token=t;object=k?module-path=/m.so&pin-value=REDACTED",
		"pkcs11:token=t;object=k?pin-value=1234&module-path=/m.so":     "pkcs11:token=t;object=k?pin-value=REDACTED&module-path=/m.so",
		"pkcs11:token=t;object=k?module-path=/m.so&pin-source=env:PIN": "pkcs11:token=t;object=k?module-path=/m.so&pin-source=env:PIN",
		// A name percent-encoded all the way ("p%69n" is "pin") is read as
		// the module would read it.
		"pkcs11:token=t;object=k?module-path=/m.so&p%69n-value=1234": "pkcs11:token=t;object=k?module-path=/m.so&p%69n-value=REDACTED",
		"hashivault://alice": "hashivault://alice",
		"/home/a/alice.key":  "/home/a/alice.key",
	} {
		if got := registry.DisplayRef(ref); got != want {
			t.Errorf("DisplayRef(%s) = %s", ref, got)
		}
	}
}

// TestPKCS11NotInBuild: a build without cgo says so, rather than read a
// pkcs11: reference as a file (CGO_ENABLED=0 go test -run PKCS11 ./registry).
func TestPKCS11NotInBuild(t *testing.T) {
	if registry.PKCS11Available {
		t.Skip("PKCS#11 is in this build")
	}
	_, err := registry.OpenSigner(t.Context(), "pkcs11:token=t;object=k?module-path=/m.so&pin-value=1", 0)
	if !errors.Is(err, registry.ErrKMS) || !strings.Contains(err.Error(), "PKCS#11 is not in this build") || strings.Contains(err.Error(), "pin-value=1") {
		t.Fatalf("%v", err)
	}
}

// TestPKCS11ByTokenSerialOrSlot: the token may be named by its serial
// number or its slot instead of its label, and each names the same key; a
// key named by CKA_ID alone that is not there is named by its ID in the
// error.
func TestPKCS11ByTokenSerialOrSlot(t *testing.T) {
	tk := kmstest.SoftHSM(t, "pedigree")
	ref := tk.CreateKey(t, "alice")
	byLabel, err := registry.OpenSigner(t.Context(), ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("softhsm2-util", "--show-slots").CombinedOutput()
	if err != nil {
		t.Fatalf("softhsm2-util --show-slots: %v: %s", err, out)
	}
	// The slot whose token is labelled tk.Label, and that token's serial.
	var slot, serial, cur string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "Slot "):
			cur = strings.TrimPrefix(line, "Slot ")
		case strings.HasPrefix(f, "Serial number:"):
			serial = strings.TrimSpace(strings.TrimPrefix(f, "Serial number:"))
		case strings.HasPrefix(f, "Label:") && strings.TrimSpace(strings.TrimPrefix(f, "Label:")) == tk.Label:
			slot = cur
		}
		if slot != "" && serial != "" && strings.HasPrefix(f, "Label:") {
			break
		}
	}
	if slot == "" || serial == "" {
		t.Fatalf("no slot or serial for token %q in:\n%s", tk.Label, out)
	}
	for _, other := range []string{
		strings.Replace(ref, "token="+tk.Label, "serial="+serial, 1),
		strings.Replace(ref, "token="+tk.Label, "slot-id="+slot, 1),
	} {
		registry.ClosePKCS11() // each found afresh, as a new command would
		s, err := registry.OpenSigner(t.Context(), other, 0)
		if err != nil || !s.Public().Equal(byLabel.Public()) {
			t.Fatalf("%s: %v", registry.DisplayRef(other), err)
		}
		if _, err := s.Sign([]byte("x")); err != nil {
			t.Fatalf("%s: %v", registry.DisplayRef(other), err)
		}
	}
	// Logged in by label, the token named by its slot with another PIN is
	// the same token: refused (the module would take any PIN now).
	registry.ClosePKCS11()
	if _, err := registry.OpenSigner(t.Context(), ref, 0); err != nil {
		t.Fatal(err)
	}
	wrongBySlot := strings.Replace(strings.Replace(ref, "token="+tk.Label, "slot-id="+slot, 1), "pin-source=file:"+tk.PINFile, "pin-value=0000-not-the-pin", 1)
	if _, err := registry.OpenSigner(t.Context(), wrongBySlot, 0); !errors.Is(err, registry.ErrKMS) || !strings.Contains(err.Error(), "another PIN") {
		t.Fatalf("the token by its slot with a wrong PIN, logged in by label: %v", err)
	}
	registry.ClosePKCS11()
	noID := strings.Replace(ref, "object=alice", "id=%09%fe", 1)
	if _, err := registry.OpenSigner(t.Context(), noID, 0); !errors.Is(err, registry.ErrKMS) || !strings.Contains(err.Error(), "with id=09fe") {
		t.Fatalf("a key by an ID the token does not hold: %v", err)
	}
}
