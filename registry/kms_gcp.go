//go:build !pedigree_nokms_gcp

package registry

// The Google Cloud KMS provider: keys named
// gcpkms://projects/P/locations/L/keyRings/R/cryptoKeys/K[/cryptoKeyVersions/V]
// (algorithm EC_SIGN_P256_SHA256), credentials as Google's client libraries
// find them (Application Default Credentials). Built in by default; build
// with -tags pedigree_nokms_gcp to leave it out. See docs/keys.md for the
// measured size.
import _ "github.com/sigstore/sigstore/pkg/signature/kms/gcp"
