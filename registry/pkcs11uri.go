package registry

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A PKCS#11 key reference is an RFC 7512 URI:
//
//	pkcs11:token=pedigree;object=alice?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/run/secrets/pin
//
// The token is named by exactly one of token= (its label), serial= or
// slot-id=; the key by object= (its label), id= (its CKA_ID, percent-encoded
// bytes), or both. module-path= is the PKCS#11 library to load, an absolute
// path. The PIN comes from pin-source=file:PATH (a file only its owner may
// read, as a key file), pin-source=env:NAME (an environment variable; env: is
// pedigree's, not the RFC's), or pin-value= (a literal: it is then on the
// command line, where other users of the host may see it). An attribute
// this reader does not enforce is refused rather than ignored: a URI that
// says which token it means is never served by another.
const pkcs11Scheme = "pkcs11:"

// errNoPKCS11: a pkcs11: reference given to a build without PKCS#11.
var errNoPKCS11 = errors.New("PKCS#11 is not in this build of pedigree: it needs cgo (build with CGO_ENABLED=1 and a C compiler, without -tags pedigree_nopkcs11)")

// isPKCS11Ref reports whether ref is a pkcs11: URI.
func isPKCS11Ref(ref string) bool { return strings.HasPrefix(ref, pkcs11Scheme) }

// pkcs11Ref is a parsed pkcs11: key reference.
type pkcs11Ref struct {
	module                    string // module-path, absolute
	token, serial             string // the token: by label, or by serial number
	slot                      *int   // or by slot-id
	object                    []byte // the key's CKA_LABEL, nil when not given
	id                        []byte // the key's CKA_ID, nil when not given
	pinValue, pinSource       string
	pinValueSet, pinSourceSet bool
}

// parsePKCS11Ref parses an RFC 7512 pkcs11: URI. Errors are ErrBadKey and
// never quote a pin-value.
func parsePKCS11Ref(ref string) (*pkcs11Ref, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadKey, DisplayRef(ref), fmt.Sprintf(format, a...))
	}
	rest, ok := strings.CutPrefix(ref, pkcs11Scheme)
	if !ok {
		return nil, bad("not a pkcs11: URI")
	}
	path, query, _ := strings.Cut(rest, "?")
	r := &pkcs11Ref{}
	seen := map[string]bool{}
	attrs := func(s, sep string, set func(name, value string) error) error {
		if s == "" {
			return nil
		}
		prev := ""
		for _, a := range strings.Split(s, sep) {
			name, raw, ok := strings.Cut(a, "=")
			if !ok && mayHoldPIN(prev) {
				// Most likely the rest of a PIN cut at an unencoded sep.
				return bad("%s= holds an unencoded %q: percent-encode it (%%%02X)", prev, sep, sep[0])
			}
			if !ok || name == "" {
				return bad("%q is not NAME=VALUE", redactPINs(a, sep))
			}
			prev = name
			if seen[name] {
				return bad("%s= is given twice", name)
			}
			seen[name] = true
			v, err := url.PathUnescape(raw)
			if err != nil {
				if mayHoldPIN(name) {
					return bad("%s= is not percent-encoded", name) // its detail would quote the PIN
				}
				return bad("%s=: %v", name, err)
			}
			if err := set(name, v); err != nil {
				return err
			}
		}
		return nil
	}
	err := attrs(path, ";", func(name, v string) error {
		switch name {
		case "token":
			r.token = v
		case "serial":
			r.serial = v
		case "slot-id":
			n, err := strconv.ParseUint(v, 10, 31)
			if err != nil {
				return bad("slot-id=%q is not a slot number", v)
			}
			i := int(n)
			r.slot = &i
		case "object":
			r.object = []byte(v)
		case "id":
			r.id = []byte(v)
		case "type":
			if v != "private" {
				return bad("type=%s: a signing key is type=private", v)
			}
		default:
			return bad("path attribute %s= is not supported (token=, serial=, slot-id=, object=, id=, type=private)", name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = attrs(query, "&", func(name, v string) error {
		switch name {
		case "module-path":
			r.module = v
		case "pin-source":
			r.pinSource, r.pinSourceSet = v, true
		case "pin-value":
			r.pinValue, r.pinValueSet = v, true
		default:
			return bad("query attribute %s= is not supported (module-path=, pin-source=, pin-value=)", name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	n := 0
	for _, set := range []bool{r.token != "", r.serial != "", r.slot != nil} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		return nil, bad("name the token by exactly one of token=LABEL, serial=, slot-id=")
	case len(r.object) == 0 && len(r.id) == 0:
		return nil, bad("name the key by object=LABEL or id=")
	case r.module == "":
		return nil, bad("module-path= is required (the PKCS#11 library, e.g. /usr/lib/softhsm/libsofthsm2.so)")
	case !filepath.IsAbs(r.module):
		return nil, bad("module-path=%s is not an absolute path", r.module)
	case r.pinValueSet && r.pinValue == redacted:
		// The reference as an error or hint showed it: logging in with it
		// would spend one of the token's PIN tries on the word.
		return nil, bad("pin-value=%s is how pedigree shows a PIN it hides, not a PIN: give the PIN (better: pin-source=env:NAME or file:PATH)", redacted)
	case r.pinValueSet && r.pinSourceSet:
		return nil, bad("give pin-source= or pin-value=, not both")
	case !r.pinValueSet && !r.pinSourceSet:
		return nil, bad("no PIN: add pin-source=file:PATH or pin-source=env:NAME (or pin-value=, which puts the PIN on the command line)")
	}
	return r, nil
}

// pin reads the PIN the reference names.
func (r *pkcs11Ref) pin(display string) (string, error) {
	if r.pinValueSet {
		return r.pinValue, nil
	}
	if name, ok := strings.CutPrefix(r.pinSource, "env:"); ok {
		v, set := os.LookupEnv(name)
		if !set || v == "" {
			return "", fmt.Errorf("%w: %s: pin-source=env:%s: $%s is not set", ErrBadKey, display, name, name)
		}
		return v, nil
	}
	path := r.pinSource
	if u, ok := strings.CutPrefix(path, "file:"); ok {
		// file:/p and file:///p both name /p.
		path = u
		if strings.HasPrefix(u, "//") {
			pu, err := url.Parse(r.pinSource)
			if err != nil || (pu.Host != "" && pu.Host != "localhost") {
				return "", fmt.Errorf("%w: %s: pin-source=%s is not a local file", ErrBadKey, display, r.pinSource)
			}
			path = pu.Path
		}
	}
	if path == "" || strings.Contains(path, ":") && !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("%w: %s: pin-source=%s: want file:PATH or env:NAME", ErrBadKey, display, r.pinSource)
	}
	// A PIN file is a secret as a key file is: its owner's alone.
	if err := checkPrivateMode(path); err != nil {
		return "", fmt.Errorf("%s: pin-source: %w", display, err)
	}
	b, err := readKeyFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: pin-source: %w", display, err)
	}
	pin := strings.TrimRight(string(b), "\r\n")
	if pin == "" {
		return "", fmt.Errorf("%w: %s: pin-source %s is empty", ErrBadKey, display, path)
	}
	return pin, nil
}

// redacted stands for a PIN in what DisplayRef shows.
const redacted = "REDACTED"

// DisplayRef is ref as errors and hints may show it: in a pkcs11: URI the
// value of every attribute that may hold a PIN is replaced by "REDACTED":
// pin-value=, and any other attribute whose name, in any case or
// percent-encoded, says "pin" (but pin-source=, which names where the PIN
// is), in the query or in the path, where the reader takes no PIN but a
// person may have put one. Every other reference is itself.
func DisplayRef(ref string) string {
	if !isPKCS11Ref(ref) {
		return ref
	}
	path, query, ok := strings.Cut(ref, "?")
	path = redactPINs(path, ";")
	if !ok {
		return path
	}
	return path + "?" + redactPINs(query, "&")
}

// redactPINs redacts the PIN-like attributes of a URI part whose attributes
// are separated by sep, and what follows one up to the next NAME=VALUE: a
// PIN with an unencoded separator in it ("pin-value=12&34") is redacted
// whole, not cut at the separator.
func redactPINs(s, sep string) string {
	as := strings.Split(s, sep)
	inPIN := false
	for i, a := range as {
		name, _, hasValue := strings.Cut(a, "=")
		if inPIN && !hasValue {
			as[i] = redacted
			continue
		}
		inPIN = mayHoldPIN(strings.TrimPrefix(name, pkcs11Scheme))
		if !inPIN {
			continue
		}
		if hasValue {
			as[i] = name + "=" + redacted
		} else {
			as[i] = redacted
		}
	}
	return strings.Join(as, sep)
}

// mayHoldPIN reports whether an attribute named name (as written, perhaps
// percent-encoded) may hold a PIN: pin-value, or a misspelling of it.
func mayHoldPIN(name string) bool {
	if n, err := url.PathUnescape(name); err == nil {
		name = n
	}
	name = strings.ToLower(name)
	return strings.Contains(name, "pin") && name != "pin-source"
}

// CredentialEnv names the environment variables that give the use of the
// key ref names: a pkcs11: reference's pin-source=env:NAME, and Vault's and
// OpenBao's token for hashivault:// and openbao://. A process that holds the
// key keeps them from the programs it starts (the gateway's upstreams), which
// would otherwise inherit the means to sign as the key's principal. It
// reads no variable and opens nothing.
func CredentialEnv(ref string) []string {
	switch {
	case isPKCS11Ref(ref):
		r, err := parsePKCS11Ref(ref)
		if err != nil {
			return nil
		}
		if name, ok := strings.CutPrefix(r.pinSource, "env:"); ok && name != "" {
			return []string{name}
		}
	case strings.HasPrefix(ref, "hashivault://"), strings.HasPrefix(ref, "openbao://"):
		return []string{"VAULT_TOKEN", "BAO_TOKEN"}
	}
	return nil
}
