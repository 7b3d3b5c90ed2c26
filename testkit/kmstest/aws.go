package kmstest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/pedigree-ai/pedigree/registry"
)

// LocalKMSVersion is the github.com/nsmithuk/local-kms that .ci/run's real
// tier installs (go install ...@LocalKMSVersion).
const LocalKMSVersion = "v0.0.0-20260228092603-2a5e92d09ab6"

// localKMSBinary finds local-kms on $PATH or in $(go env GOPATH)/bin.
func localKMSBinary() string {
	if p, err := exec.LookPath("local-kms"); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if home, err := os.UserHomeDir(); err == nil {
			gopath = filepath.Join(home, "go")
		}
	}
	if p := filepath.Join(gopath, "bin", "local-kms"); gopath != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// StartLocalKMS runs local-kms (AWS KMS's API, offline) on loopback for the
// test and points the AWS SDK at it through the environment
// (AWS_ENDPOINT_URL_KMS, a region, dummy credentials). It skips the test
// when local-kms is not installed (.ci/run's real tier installs it) or
// under -short.
func StartLocalKMS(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("local-kms: a real part (-short)")
	}
	bin := localKMSBinary()
	if bin == "" {
		t.Skipf("local-kms is not installed: go install github.com/nsmithuk/local-kms@%s", LocalKMSVersion)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port), "KMS_REGION=eu-west-2", "KMS_ACCOUNT_ID=111122223333",
		"KMS_DATA_PATH="+t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("local-kms did not listen on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Setenv("AWS_ENDPOINT_URL_KMS", "http://"+addr)
	t.Setenv("AWS_REGION", "eu-west-2")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDLOCALKMS")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local-kms-secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
}

// CreateAWSKey makes an ECDSA P-256 signing key in the running local-kms
// under alias ("alias/NAME") and returns its reference, awskms:///alias/NAME.
func CreateAWSKey(t testing.TB, alias string) string {
	t.Helper()
	ref := "awskms:///" + alias
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := registry.CreateKMSKey(ctx, ref, "ECC_NIST_P256"); err != nil {
		t.Fatal(err)
	}
	return ref
}
