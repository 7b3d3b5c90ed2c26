package fleet_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pedigree-ai/pedigree/internal/fleet"
)

// TestTLS: a server that speaks TLS only and requires a client
// certificate takes a node given the CA and its certificate, and refuses a
// node that does not trust its CA, one without a certificate, and a
// plain-text client.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := newCert(t, dir, "ca", nil, nil)
	newCert(t, dir, "server", ca, caKey)
	newCert(t, dir, "node", ca, caKey)
	other, otherKey := newCert(t, dir, "other-ca", nil, nil)
	newCert(t, dir, "stranger", other, otherKey)
	f := func(name string) string { return filepath.Join(dir, name) }
	s, err := fleet.StartServer(fleet.ServerOptions{Name: "tls", Dir: t.TempDir(), TLSCert: f("server.pem"), TLSKey: f("server.key"), TLSCA: f("ca.pem")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := fleet.Connect(ctx, fleet.Config{URL: s.URL(), Replicas: 1, Stream: "TLS", CA: f("ca.pem"), Cert: f("node.pem"), Key: f("node.key")})
	if err != nil {
		t.Fatalf("the node with the CA and its certificate: %v", err)
	}
	n.Close()
	for why, cfg := range map[string]fleet.Config{
		"no client certificate":          {CA: f("ca.pem")},
		"a certificate of another CA":    {CA: f("ca.pem"), Cert: f("stranger.pem"), Key: f("stranger.key")},
		"the server's CA is not trusted": {CA: f("other-ca.pem"), Cert: f("node.pem"), Key: f("node.key")},
	} {
		cfg.URL, cfg.Replicas, cfg.Stream = s.URL(), 1, "TLS"
		if n, err := fleet.Connect(ctx, cfg); err == nil {
			n.Close()
			t.Errorf("%s: connected", why)
		}
	}
	if nc, err := nats.Connect(s.URL()); err == nil {
		nc.Close()
		t.Error("a plain-text client connected")
	}
}

// newCert writes name.pem and name.key in dir: a CA when parent is nil,
// else a certificate for 127.0.0.1 signed by parent.
func newCert(t *testing.T, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	} else {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}
