package kmstest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pedigree-ai/pedigree/registry"
)

// softHSMModules are where Debian's libsofthsm2 puts the PKCS#11 module.
var softHSMModules = []string{
	"/usr/lib/softhsm/libsofthsm2.so",
	"/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
	"/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so",
}

// Token is a softhsm2 token made for one test: its module, label and
// user PIN, and a file holding the PIN (mode 0600) for pin-source=.
type Token struct {
	Module, Label, PIN, PINFile string
}

// SoftHSM initialises a softhsm2 token (Debian's softhsm2, a real PKCS#11
// module) in a temporary directory: $SOFTHSM2_CONF points at a config of
// its own for the test, and every token this process opened is closed
// before and after, so that the module reads that config. It skips the test
// when softhsm2 is not installed (.ci/run's real tier installs it), under
// -short, or in a build without PKCS#11 (CGO_ENABLED=0).
func SoftHSM(t testing.TB, label string) *Token {
	t.Helper()
	if testing.Short() {
		t.Skip("softhsm2: a real part (-short)")
	}
	if !registry.PKCS11Available {
		t.Skip("PKCS#11 is not in this build (CGO_ENABLED=0)")
	}
	util, err := exec.LookPath("softhsm2-util")
	module := ""
	for _, m := range softHSMModules {
		if _, serr := os.Stat(m); serr == nil {
			module = m
			break
		}
	}
	if err != nil || module == "" {
		t.Skip("softhsm2 is not installed: apt-get install softhsm2")
	}
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.Mkdir(tokens, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "softhsm2.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "directories.tokendir = %s\nobjectstore.backend = file\nlog.level = ERROR\n", tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	registry.ClosePKCS11()
	t.Setenv("SOFTHSM2_CONF", conf)
	t.Cleanup(registry.ClosePKCS11)
	tk := &Token{Module: module, Label: label, PIN: "4711-" + label, PINFile: filepath.Join(dir, "pin")}
	out, err := exec.Command(util, "--init-token", "--free", "--label", label, "--pin", tk.PIN, "--so-pin", "so-"+tk.PIN).CombinedOutput()
	if err != nil {
		t.Fatalf("softhsm2-util --init-token: %v: %s", err, out)
	}
	if err := os.WriteFile(tk.PINFile, []byte(tk.PIN+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return tk
}

// Ref is the pkcs11: reference of the key labelled object in the token,
// its PIN read from the token's PIN file.
func (tk *Token) Ref(object string) string {
	return fmt.Sprintf("pkcs11:token=%s;object=%s?module-path=%s&pin-source=file:%s", tk.Label, object, tk.Module, tk.PINFile)
}

// CreateKey makes an ECDSA P-256 key pair labelled object in the token
// (through the token's own key generation: the private half never leaves
// it) and returns its reference. The token is closed after, as a command's
// process would leave it.
func (tk *Token) CreateKey(t testing.TB, object string) string {
	t.Helper()
	ref := tk.Ref(object)
	if _, err := registry.CreateKMSKey(context.Background(), ref, registry.AlgECDSAP256); err != nil {
		t.Fatal(err)
	}
	registry.ClosePKCS11()
	return ref
}
