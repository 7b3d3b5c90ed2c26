//go:build cgo && !pedigree_nopkcs11

package registry

// PKCS#11 keys (an HSM, a smart card, softhsm2): pkcs11: URIs (RFC 7512,
// see pkcs11uri.go), through github.com/ThalesGroup/crypto11, which loads
// the token's module with dlopen and so needs cgo. A build without cgo, or
// with -tags pedigree_nopkcs11, leaves it out (kms_nopkcs11.go) and says so
// when a pkcs11: reference is used. See docs/keys.md.

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ThalesGroup/crypto11"
	"github.com/miekg/pkcs11"
)

// PKCS11Available reports whether this build reads pkcs11: key references.
const PKCS11Available = true

// tokenID names one token of one module: the module's resolved path and
// the token's label, serial or slot.
type tokenID struct {
	module, token, serial string
	slot                  int // -1 when the token is not named by slot
}

// openToken is a token this process has logged in to, and with which PIN:
// its module and slot say which token it is, however a reference named it.
type openToken struct {
	ctx    *crypto11.Context
	pin    string
	module string
	slot   uint
}

// tokens holds each token open in this process. A PKCS#11 login is the
// process's, not a session's: once a token is logged in to, the module
// accepts a second login whatever its PIN (CKR_USER_ALREADY_LOGGED_IN).
// So a token is opened once, and a second reference to it with another PIN
// is refused here rather than let through by the module.
var tokens = struct {
	sync.Mutex
	m map[tokenID]*openToken
}{m: map[tokenID]*openToken{}}

// ClosePKCS11 logs out of every PKCS#11 token this process opened and
// unloads their modules; a Signer opened from one then fails. The CLI calls
// it when a command ends.
//
// It waits at most pkcs11CloseWait: closing waits for every session to come
// back, and a module stuck in a call (the one a timed-out signature left
// behind) would otherwise hold the command past its deadline forever.
func ClosePKCS11() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tokens.Lock()
		defer tokens.Unlock()
		for id, t := range tokens.m {
			t.ctx.Close()
			delete(tokens.m, id)
		}
	}()
	select {
	case <-done:
	case <-time.After(pkcs11CloseWait):
	}
}

// pkcs11CloseWait bounds ClosePKCS11 (a variable only so that its test
// need not wait the whole bound).
var pkcs11CloseWait = 2 * time.Second

// token opens (or finds open) the token r names, logged in with pin.
// The caller holds tokens' lock.
func (r *pkcs11Ref) openToken(pin string) (*crypto11.Context, error) {
	module, err := filepath.EvalSymlinks(r.module)
	if err != nil {
		return nil, fmt.Errorf("module-path %s: %v", r.module, err)
	}
	id := tokenID{module: module, token: r.token, serial: r.serial, slot: -1}
	if r.slot != nil {
		id.slot = *r.slot
	}
	if t, ok := tokens.m[id]; ok {
		if t.pin != pin {
			return nil, fmt.Errorf("%s is already logged in to by this process with another PIN", r.tokenName())
		}
		return t.ctx, nil
	}
	c, err := crypto11.Configure(&crypto11.Config{Path: module, TokenLabel: r.token, TokenSerial: r.serial, SlotNumber: r.slot, Pin: pin})
	if err != nil {
		return nil, r.explain(err)
	}
	// The same token may be named another way (token= then serial= or
	// slot-id=): its login, already made, would take this PIN whatever it
	// is. The slot the module found says which token it is.
	slot, err := r.slotOf(module)
	if err != nil {
		c.Close()
		return nil, r.explain(err)
	}
	for _, t := range tokens.m {
		if t.module == module && t.slot == slot && t.pin != pin {
			c.Close()
			return nil, fmt.Errorf("%s is already logged in to by this process with another PIN (it is the token in slot %d, named another way)", r.tokenName(), slot)
		}
	}
	tokens.m[id] = &openToken{ctx: c, pin: pin, module: module, slot: slot}
	return c, nil
}

// slotOf finds the slot of the token r names in module, as crypto11 finds
// it (the first slot whose token matches). The module is already loaded
// and initialised by crypto11: this handle shares it and does not
// finalise it.
func (r *pkcs11Ref) slotOf(module string) (uint, error) {
	p := pkcs11.New(module)
	if p == nil {
		return 0, fmt.Errorf("failed to open module %s", module)
	}
	defer p.Destroy()
	if err := p.Initialize(); err == nil {
		defer p.Finalize() // not crypto11's instance after all: leave it as found
	} else if code, ok := err.(pkcs11.Error); !ok || code != pkcs11.CKR_CRYPTOKI_ALREADY_INITIALIZED {
		return 0, err
	}
	slots, err := p.GetSlotList(true)
	if err != nil {
		return 0, err
	}
	for _, slot := range slots {
		ti, err := p.GetTokenInfo(slot)
		if err != nil {
			return 0, err
		}
		if (r.slot != nil && uint(*r.slot) == slot) ||
			(ti.SerialNumber != "" && ti.SerialNumber == r.serial) ||
			(ti.Label != "" && ti.Label == r.token) {
			return slot, nil
		}
	}
	return 0, errors.New("could not find PKCS#11 token")
}

// tokenName says which token r names.
func (r *pkcs11Ref) tokenName() string {
	switch {
	case r.token != "":
		return fmt.Sprintf("token %q", r.token)
	case r.serial != "":
		return fmt.Sprintf("the token with serial %q", r.serial)
	}
	return fmt.Sprintf("the token in slot %d", *r.slot)
}

// keyName says which key r names.
func (r *pkcs11Ref) keyName() string {
	var s []string
	if r.object != nil {
		s = append(s, fmt.Sprintf("object=%q", r.object))
	}
	if r.id != nil {
		s = append(s, fmt.Sprintf("id=%x", r.id))
	}
	return strings.Join(s, " ")
}

// explain turns crypto11's and the module's errors into what a person
// can act on.
func (r *pkcs11Ref) explain(err error) error {
	var code pkcs11.Error
	switch {
	case errors.As(err, &code) && code == pkcs11.CKR_PIN_INCORRECT:
		return fmt.Errorf("%s refused the PIN (CKR_PIN_INCORRECT)", r.tokenName())
	case errors.As(err, &code) && code == pkcs11.CKR_PIN_LOCKED:
		return fmt.Errorf("%s has locked its PIN (CKR_PIN_LOCKED)", r.tokenName())
	case strings.Contains(err.Error(), "could not find PKCS#11 token"):
		return fmt.Errorf("module %s has no %s", r.module, r.tokenName())
	case strings.Contains(err.Error(), "failed to open module"):
		if _, serr := os.Stat(r.module); serr != nil {
			return fmt.Errorf("module-path: %v", serr)
		}
		return fmt.Errorf("module-path %s is not a PKCS#11 module that loads", r.module)
	}
	return err
}

// openPKCS11 finds the key pair r names and returns its public key and a
// function that signs with it in the token: ECDSA over the message's
// SHA-256, an ASN.1 signature as every P-256 verifier here reads.
func openPKCS11(r *pkcs11Ref, pin string) (crypto.PublicKey, func(context.Context, []byte) ([]byte, error), error) {
	tokens.Lock()
	defer tokens.Unlock()
	c, err := r.openToken(pin)
	if err != nil {
		return nil, nil, err
	}
	keys, err := c.FindKeyPairs(r.id, r.object)
	if err != nil {
		return nil, nil, r.explain(err)
	}
	switch len(keys) {
	case 0:
		return nil, nil, fmt.Errorf("%s holds no key pair with %s", r.tokenName(), r.keyName())
	case 1:
	default:
		return nil, nil, fmt.Errorf("%s holds %d key pairs with %s: name one (add id=)", r.tokenName(), len(keys), r.keyName())
	}
	k := keys[0]
	sign := func(_ context.Context, msg []byte) ([]byte, error) {
		h := sha256.Sum256(msg)
		sig, err := k.Sign(rand.Reader, h[:], crypto.SHA256)
		if err != nil {
			return nil, r.explain(err)
		}
		return sig, nil
	}
	return k.Public(), sign, nil
}

// createPKCS11Key makes an ECDSA P-256 key pair in the token r names,
// labelled object= and with CKA_ID id= (random when not given), unless a
// key pair with them is already there; it returns the public key.
func createPKCS11Key(r *pkcs11Ref, pin, algorithm string) (crypto.PublicKey, error) {
	if algorithm != AlgECDSAP256 {
		return nil, fmt.Errorf("a PKCS#11 key is %s, not %q (crypto11 has no Ed25519)", AlgECDSAP256, algorithm)
	}
	if pub, _, err := openPKCS11(r, pin); err == nil {
		return pub, nil
	}
	tokens.Lock()
	defer tokens.Unlock()
	c, err := r.openToken(pin)
	if err != nil {
		return nil, err
	}
	id := r.id
	if id == nil {
		id = make([]byte, 16)
		if _, err := rand.Read(id); err != nil {
			return nil, err
		}
	}
	var k crypto11.Signer
	if r.object != nil {
		k, err = c.GenerateECDSAKeyPairWithLabel(id, r.object, elliptic.P256())
	} else {
		k, err = c.GenerateECDSAKeyPair(id, elliptic.P256())
	}
	if err != nil {
		return nil, r.explain(err)
	}
	if _, ok := k.Public().(*ecdsa.PublicKey); !ok {
		return nil, fmt.Errorf("the token made a %T", k.Public())
	}
	return k.Public(), nil
}
