package kmstest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
)

// Vault is a Transit engine at /v1/transit.
type Vault struct {
	*httptest.Server
	Token string

	mu   sync.Mutex
	keys map[string]crypto.Signer
	// Signs counts the signatures made.
	Signs atomic.Int64
	// hold, when set (Silence), is waited on before every sign: a Vault
	// that does not answer. Guarded by mu: the handler runs on the
	// server's goroutines.
	hold chan struct{}
}

// Silence makes every sign wait until the returned function is called (a
// Vault that does not answer), then answer again.
func (v *Vault) Silence() (answer func()) {
	ch := make(chan struct{})
	v.mu.Lock()
	v.hold = ch
	v.mu.Unlock()
	return func() {
		v.mu.Lock()
		if v.hold == ch {
			v.hold = nil
		}
		v.mu.Unlock()
		close(ch)
	}
}

// NewVault starts a Transit engine; close it with Close.
func NewVault(token string) *Vault {
	v := &Vault{Token: token, keys: map[string]crypto.Signer{}}
	v.Server = httptest.NewServer(http.HandlerFunc(v.serve))
	return v
}

// AddKey makes a key of type "ed25519" or "ecdsa-p256" named name and
// returns its public half.
func (v *Vault) AddKey(name, typ string) crypto.PublicKey {
	var k crypto.Signer
	switch typ {
	case "ed25519":
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		k = priv
	case "ecdsa-p256":
		k, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		panic("kmstest: key type " + typ)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.keys[name] = k
	return k.Public()
}

func (v *Vault) key(name string) crypto.Signer {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.keys[name]
}

func vaultError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string][]string{"errors": {msg}})
}

func reply(w http.ResponseWriter, data map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"data": data})
}

func (v *Vault) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Vault-Token") != v.Token {
		vaultError(w, http.StatusForbidden, "permission denied")
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/transit/"), "/")
	if len(parts) < 2 || len(parts) > 3 || !strings.HasPrefix(r.URL.Path, "/v1/transit/") {
		vaultError(w, http.StatusNotFound, "no handler for route")
		return
	}
	op, name := parts[0], parts[1]
	hash := "sha2-256"
	if len(parts) == 3 {
		hash = parts[2]
	}
	k := v.key(name)
	if k == nil {
		vaultError(w, http.StatusBadRequest, "encryption key not found")
		return
	}
	switch {
	case op == "keys" && r.Method == http.MethodGet:
		entry := map[string]any{"creation_time": "2026-01-01T00:00:00Z"}
		switch pub := k.Public().(type) {
		case ed25519.PublicKey:
			entry["name"] = "ed25519"
			entry["public_key"] = base64.StdEncoding.EncodeToString(pub)
		case *ecdsa.PublicKey:
			der, _ := x509.MarshalPKIXPublicKey(pub)
			entry["name"] = "P-256"
			entry["public_key"] = string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
		}
		typ := "ed25519"
		if _, ok := k.(*ecdsa.PrivateKey); ok {
			typ = "ecdsa-p256"
		}
		reply(w, map[string]any{"name": name, "type": typ, "latest_version": 1, "min_decryption_version": 1,
			"supports_signing": true, "keys": map[string]any{"1": entry}})
	case (op == "sign" || op == "verify") && (r.Method == http.MethodPost || r.Method == http.MethodPut):
		var req struct {
			Input     string `json:"input"`
			Prehashed bool   `json:"prehashed"`
			Signature string `json:"signature"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			vaultError(w, http.StatusBadRequest, err.Error())
			return
		}
		in, err := base64.StdEncoding.DecodeString(req.Input)
		if err != nil {
			vaultError(w, http.StatusBadRequest, "unable to decode input as base64")
			return
		}
		if op == "sign" {
			v.mu.Lock()
			hold := v.hold
			v.mu.Unlock()
			if hold != nil {
				select {
				case <-hold:
				case <-r.Context().Done():
					return
				}
			}
			sig, err := transitSign(k, in, req.Prehashed, hash)
			if err != nil {
				vaultError(w, http.StatusBadRequest, err.Error())
				return
			}
			v.Signs.Add(1)
			reply(w, map[string]any{"signature": "vault:v1:" + base64.StdEncoding.EncodeToString(sig), "key_version": 1})
			return
		}
		sig, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(req.Signature, "vault:v1:"))
		if err != nil {
			vaultError(w, http.StatusBadRequest, "invalid signature encoding")
			return
		}
		reply(w, map[string]any{"valid": transitVerify(k, in, req.Prehashed, hash, sig)})
	default:
		vaultError(w, http.StatusMethodNotAllowed, "unsupported operation")
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// transitSign signs as Vault does: Ed25519 signs the input itself (Vault
// refuses prehashed input for it); ECDSA signs the input as the digest when
// prehashed, else its hash.
func transitSign(k crypto.Signer, in []byte, prehashed bool, hash string) ([]byte, error) {
	switch key := k.(type) {
	case ed25519.PrivateKey:
		if prehashed {
			return nil, errString("prehashed input is not supported for ed25519 keys")
		}
		return ed25519.Sign(key, in), nil
	case *ecdsa.PrivateKey:
		if hash != "sha2-256" {
			return nil, errString("this fake signs sha2-256 only")
		}
		digest := in
		if !prehashed {
			s := sha256.Sum256(in)
			digest = s[:]
		}
		return ecdsa.SignASN1(rand.Reader, key, digest)
	}
	return nil, errString("unsupported key type")
}

func transitVerify(k crypto.Signer, in []byte, prehashed bool, hash string, sig []byte) bool {
	switch pub := k.Public().(type) {
	case ed25519.PublicKey:
		return !prehashed && ed25519.Verify(pub, in, sig)
	case *ecdsa.PublicKey:
		digest := in
		if !prehashed {
			s := sha256.Sum256(in)
			digest = s[:]
		}
		return hash == "sha2-256" && ecdsa.VerifyASN1(pub, digest, sig)
	}
	return false
}
