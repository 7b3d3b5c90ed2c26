//go:build !cgo || pedigree_nopkcs11

package registry

import (
	"context"
	"crypto"
)

// PKCS11Available reports whether this build reads pkcs11: key references:
// not this one, built without cgo (CGO_ENABLED=0) or with -tags
// pedigree_nopkcs11. See kms_pkcs11.go and docs/keys.md.
const PKCS11Available = false

// ClosePKCS11 has nothing to close in a build without PKCS#11.
func ClosePKCS11() {}

func openPKCS11(*pkcs11Ref, string) (crypto.PublicKey, func(context.Context, []byte) ([]byte, error), error) {
	return nil, nil, errNoPKCS11
}

func createPKCS11Key(*pkcs11Ref, string, string) (crypto.PublicKey, error) {
	return nil, errNoPKCS11
}
