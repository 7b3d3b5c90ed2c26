//go:build !pedigree_nokms_vault

package registry

// The Vault (and OpenBao) Transit provider: keys named hashivault://NAME or
// openbao://NAME, reached at $VAULT_ADDR with $VAULT_TOKEN. Built in by
// default (about 2 MB of the binary, measured); build with
// -tags pedigree_nokms_vault to leave it out. See docs/keys.md.
import _ "github.com/sigstore/sigstore/pkg/signature/kms/hashivault"
