package registry

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/pedigree-ai/pedigree/kv"
)

// AddUnchecked registers p as Add did before one key for two principals
// (or the operator key for one) was refused: the tests write such a store.
func (r *Registry) AddUnchecked(ctx context.Context, p Principal) error {
	pr, err := newPrincipalRow(p)
	if err != nil {
		return err
	}
	row, _ := json.Marshal(pr)
	key := append(slices.Clone(prefixPrincipal), p.ID...)
	if err := r.db.Commit(ctx, len(row), func(t kv.Txn) error { return t.Set(key, row) }); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.put(p)
}

// ParsePKCS11Ref parses a pkcs11: reference and reads its PIN, as
// OpenSigner does before it loads any module.
func ParsePKCS11Ref(ref string) (pin string, err error) {
	_, pin, err = pkcs11Open(ref)
	return pin, err
}
