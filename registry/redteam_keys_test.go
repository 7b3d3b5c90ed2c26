package registry_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/testkit/kmstest"
)

// TestRedTeamPINSourceFIFODoesNotHang: a pin-source=file: (or a key file)
// that is a FIFO nobody writes to, mode 0600 as a PIN file must be. Opening
// it for reading blocks until a writer comes, so a reference pasted from an
// untrusted source (or a FIFO planted where the PIN file was) held the
// command forever, past $PEDIGREE_KMS_TIMEOUT: the PIN was read before any
// deadline applied. Only a regular file is a PIN or key file.
func TestRedTeamPINSourceFIFODoesNotHang(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pin")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	for name, open := range map[string]func() error{
		"pin-source": func() error {
			_, err := registry.OpenSigner(t.Context(), "pkcs11:token=t;object=k?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:"+fifo, time.Second)
			return err
		},
		"key file": func() error {
			_, err := registry.OpenSigner(t.Context(), fifo, time.Second)
			return err
		},
	} {
		done := make(chan error, 1)
		go func() { done <- open() }()
		select {
		case err := <-done:
			if !errors.Is(err, registry.ErrBadKey) || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s: a FIFO: %v", name, err)
			}
		case <-time.After(5 * time.Second):
			// Unblock the reader so the test ends.
			if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				f.Close()
			}
			t.Errorf("%s: a FIFO held OpenSigner past its 1s deadline", name)
			<-done
		}
	}
}

// TestRedTeamMisplacedPINIsNotQuoted: a PIN put where the reader does not
// take it (in the URI's path, with the attribute's name in capitals or
// percent-encoded, in a URI without a query) was quoted whole in the error,
// on the terminal and in logs: "errors and hints print pin-value=REDACTED"
// held only for a well-placed pin-value.
func TestRedTeamMisplacedPINIsNotQuoted(t *testing.T) {
	const pin = "93817-secret"
	const m = "module-path=/usr/lib/softhsm/libsofthsm2.so"
	for _, ref := range []string{
		"pkcs11:token=t;object=k;pin-value=" + pin + "?" + m,
		"pkcs11:token=t;object=k;pin-value=" + pin,
		"pkcs11:token=t;object=k?" + m + "&PIN-VALUE=" + pin,
		"pkcs11:token=t;object=k?" + m + "&pin%2Dvalue=" + pin,
		"pkcs11:token=t;object=k?" + m + "&pin=" + pin,
		// A PIN with an unencoded separator: no piece of it is quoted.
		"pkcs11:token=t;object=k?" + m + "&pin-value=93817&secret",
		"pkcs11:token=t;object=k;pin-value=93817;secret?" + m,
	} {
		_, err := registry.OpenSigner(t.Context(), ref, time.Second)
		if err == nil {
			t.Errorf("%s: accepted", registry.DisplayRef(ref))
			continue
		}
		if strings.Contains(err.Error(), pin) || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "93817") {
			t.Errorf("the error quotes the PIN: %v", err)
		}
		if d := registry.DisplayRef(ref); strings.Contains(d, "secret") || strings.Contains(d, "93817") {
			t.Errorf("DisplayRef shows the PIN: %s", d)
		}
	}
}

// TestRedTeamSecondLoginBySerial: once this process is logged in to a
// token, the module accepts any second login to it. pedigree refuses a
// second reference with another PIN, but it knew a token by how the
// reference named it: the same token named by serial= instead of token=
// was another token to it, and a wrong PIN opened its key.
func TestRedTeamSecondLoginBySerial(t *testing.T) {
	tk := kmstest.SoftHSM(t, "pedigree")
	ref := tk.CreateKey(t, "alice")
	out, err := exec.Command("softhsm2-util", "--show-slots").CombinedOutput()
	if err != nil {
		t.Fatalf("softhsm2-util --show-slots: %v: %s", err, out)
	}
	m := regexp.MustCompile(`Serial number:\s+([0-9a-f]+)\s+Initialized:\s+yes`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no serial in %s", out)
	}
	if _, err := registry.OpenSigner(t.Context(), ref, 0); err != nil {
		t.Fatal(err)
	}
	const wrong = "0000-not-the-pin"
	bySerial := strings.Replace(strings.Replace(ref, "token="+tk.Label, "serial="+string(m[1]), 1), "pin-source=file:"+tk.PINFile, "pin-value="+wrong, 1)
	s, err := registry.OpenSigner(t.Context(), bySerial, 0)
	if err == nil {
		_, serr := s.Sign([]byte("signed with a PIN nobody knew"))
		t.Fatalf("a wrong PIN opened the key through serial= (signing: %v)", serr)
	}
	if !errors.Is(err, registry.ErrKMS) {
		t.Fatalf("a wrong PIN through serial=: %v", err)
	}
}

// TestRedTeamPluginFromTheWorkingDirectory: a reference with a scheme no
// built-in provider serves runs sigstore-kms-SCHEME from $PATH. A $PATH
// with "." or an empty entry (the working directory), and a pasted
// reference whose scheme names a program another user left in a shared
// directory the command runs from, must not run that program (Go's
// exec.ErrDot). This attack held; the test keeps it so.
func TestRedTeamPluginFromTheWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	plugin := filepath.Join(dir, "sigstore-kms-planted")
	if err := os.WriteFile(plugin, []byte("#!/bin/sh\ntouch "+marker+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, path := range []string{".:" + os.Getenv("PATH"), ":" + os.Getenv("PATH"), "sub/..:" + os.Getenv("PATH")} {
		t.Setenv("PATH", path)
		if _, err := registry.OpenSigner(t.Context(), "planted://k", 2*time.Second); err == nil {
			t.Fatalf("PATH=%s: a planted plugin served the key", path)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("PATH=%s: the planted plugin in the working directory ran", path)
		}
	}
	// The control: named by an absolute $PATH entry, the plugin runs (so
	// the test sees a run when there is one).
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	registry.OpenSigner(t.Context(), "planted://k", 2*time.Second)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the plugin did not run from an absolute PATH entry: %v", err)
	}
}

// TestRedTeamRedactedRefIsNotRun: the hints pedigree prints are commands
// to run, and with a pin-value they show the reference as DisplayRef does,
// pin-value=REDACTED ('mcp run' hands its approve hint to the agent in
// every denial). Run as shown, the command logged in to the token with the
// PIN "REDACTED": a PIN try spent on each run, and a smart card locks
// after a few (CKR_PIN_LOCKED), so the agent, or a person pasting the
// hint, could lock the approver out. The redacted form is refused before
// the module is loaded.
func TestRedTeamRedactedRefIsNotRun(t *testing.T) {
	tk := kmstest.SoftHSM(t, "pedigree")
	ref := tk.CreateKey(t, "alice")
	shown := registry.DisplayRef(strings.Replace(ref, "pin-source=file:"+tk.PINFile, "pin-value="+tk.PIN, 1))
	if !strings.Contains(shown, "pin-value=REDACTED") {
		t.Fatalf("DisplayRef: %s", shown)
	}
	_, err := registry.OpenSigner(t.Context(), shown, 0)
	if !errors.Is(err, registry.ErrBadKey) || errors.Is(err, registry.ErrKMS) || !strings.Contains(err.Error(), "not a PIN") {
		t.Fatalf("the redacted reference reached the token: %v", err)
	}
}
