//go:build cgo && !pedigree_nopkcs11

package registry

import (
	"testing"
	"time"
)

// TestClosePKCS11Bounded: a token stuck in a call (here: its lock held, as
// a module that never returns from C_Sign holds it) cannot hold the
// command that ends past ClosePKCS11's bound.
func TestClosePKCS11Bounded(t *testing.T) {
	wait := pkcs11CloseWait
	pkcs11CloseWait = 200 * time.Millisecond
	defer func() { pkcs11CloseWait = wait }()
	tokens.Lock()
	defer tokens.Unlock()
	start := time.Now()
	ClosePKCS11()
	if d := time.Since(start); d < pkcs11CloseWait || d > pkcs11CloseWait+time.Second {
		t.Fatalf("ClosePKCS11 took %s", d)
	}
}
