package kmstest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"hash/crc32"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	sigkms "github.com/sigstore/sigstore/pkg/signature/kms"
	"github.com/sigstore/sigstore/pkg/signature/kms/gcp"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// GCP is Cloud KMS's KeyManagementService over gRPC on loopback: the
// generated server of cloud.google.com/go/kms's own proto, serving the
// calls sigstore's gcpkms:// client makes (GetCryptoKey,
// ListCryptoKeyVersions, GetCryptoKeyVersion, GetPublicKey,
// AsymmetricSign, with the CRC32C checks the client verifies) with real
// P-256 keys. There is no Cloud KMS emulator; this is the wire format
// and the client is the real one.
type GCP struct {
	kmspb.UnimplementedKeyManagementServiceServer
	Addr  string
	Signs atomic.Int64

	mu   sync.Mutex
	keys map[string]*ecdsa.PrivateKey // by key name (projects/.../cryptoKeys/K)
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// StartGCP serves a GCP KMS on loopback for the test and points sigstore's
// gcpkms:// provider at it (its endpoint, no TLS, no credentials: the
// options a client is given for a private endpoint). It skips under -short.
func StartGCP(t testing.TB) *GCP {
	t.Helper()
	if testing.Short() {
		t.Skip("GCP KMS over gRPC: a real client (-short)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &GCP{Addr: l.Addr().String(), keys: map[string]*ecdsa.PrivateKey{}}
	s := grpc.NewServer()
	kmspb.RegisterKeyManagementServiceServer(s, g)
	go s.Serve(l)
	t.Cleanup(s.Stop)
	sigkms.AddProvider(gcp.ReferenceScheme, func(ctx context.Context, ref string, _ crypto.Hash, _ ...signature.RPCOption) (sigkms.SignerVerifier, error) {
		return gcp.LoadSignerVerifier(ctx, ref, option.WithEndpoint(g.Addr), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	})
	return g
}

// AddKey makes a P-256 signing key (EC_SIGN_P256_SHA256, one version) named
// projects/pedigree/locations/global/keyRings/test/cryptoKeys/NAME and
// returns its reference, gcpkms://....
func (g *GCP) AddKey(t testing.TB, name string) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	full := "projects/pedigree/locations/global/keyRings/test/cryptoKeys/" + name
	g.mu.Lock()
	g.keys[full] = k
	g.mu.Unlock()
	return "gcpkms://" + full
}

func (g *GCP) key(name string) (*ecdsa.PrivateKey, string, error) {
	key, version, _ := strings.Cut(name, "/cryptoKeyVersions/")
	g.mu.Lock()
	k, ok := g.keys[key]
	g.mu.Unlock()
	if !ok || (version != "" && version != "1") {
		return nil, "", status.Errorf(codes.NotFound, "%s not found", name)
	}
	return k, key, nil
}

func version(key string) *kmspb.CryptoKeyVersion {
	return &kmspb.CryptoKeyVersion{Name: key + "/cryptoKeyVersions/1", State: kmspb.CryptoKeyVersion_ENABLED,
		Algorithm: kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256, ProtectionLevel: kmspb.ProtectionLevel_HSM}
}

func (g *GCP) GetCryptoKey(_ context.Context, r *kmspb.GetCryptoKeyRequest) (*kmspb.CryptoKey, error) {
	_, key, err := g.key(r.GetName())
	if err != nil {
		return nil, err
	}
	return &kmspb.CryptoKey{Name: key, Purpose: kmspb.CryptoKey_ASYMMETRIC_SIGN,
		VersionTemplate: &kmspb.CryptoKeyVersionTemplate{Algorithm: kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256}}, nil
}

func (g *GCP) ListCryptoKeyVersions(_ context.Context, r *kmspb.ListCryptoKeyVersionsRequest) (*kmspb.ListCryptoKeyVersionsResponse, error) {
	_, key, err := g.key(r.GetParent())
	if err != nil {
		return nil, err
	}
	return &kmspb.ListCryptoKeyVersionsResponse{CryptoKeyVersions: []*kmspb.CryptoKeyVersion{version(key)}, TotalSize: 1}, nil
}

func (g *GCP) GetCryptoKeyVersion(_ context.Context, r *kmspb.GetCryptoKeyVersionRequest) (*kmspb.CryptoKeyVersion, error) {
	_, key, err := g.key(r.GetName())
	if err != nil {
		return nil, err
	}
	return version(key), nil
}

func (g *GCP) GetPublicKey(_ context.Context, r *kmspb.GetPublicKeyRequest) (*kmspb.PublicKey, error) {
	k, key, err := g.key(r.GetName())
	if err != nil {
		return nil, err
	}
	pem, err := cryptoutils.MarshalPublicKeyToPEM(&k.PublicKey)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &kmspb.PublicKey{Pem: string(pem), Algorithm: kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256, Name: key + "/cryptoKeyVersions/1",
		PemCrc32C: wrapperspb.Int64(int64(crc32.Checksum(pem, crc32c)))}, nil
}

// AsymmetricSign signs the SHA-256 digest it is sent, after checking the
// digest's CRC32C as Cloud KMS does.
func (g *GCP) AsymmetricSign(_ context.Context, r *kmspb.AsymmetricSignRequest) (*kmspb.AsymmetricSignResponse, error) {
	k, key, err := g.key(r.GetName())
	if err != nil {
		return nil, err
	}
	d := r.GetDigest().GetSha256()
	if len(d) != 32 {
		return nil, status.Error(codes.InvalidArgument, "EC_SIGN_P256_SHA256 signs a SHA-256 digest")
	}
	if c := r.GetDigestCrc32C(); c != nil && c.GetValue() != int64(crc32.Checksum(d, crc32c)) {
		return nil, status.Error(codes.InvalidArgument, "digest_crc32c does not match")
	}
	sig, err := ecdsa.SignASN1(rand.Reader, k, d)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	g.Signs.Add(1)
	return &kmspb.AsymmetricSignResponse{Signature: sig, SignatureCrc32C: wrapperspb.Int64(int64(crc32.Checksum(sig, crc32c))),
		VerifiedDigestCrc32C: r.GetDigestCrc32C() != nil, Name: key + "/cryptoKeyVersions/1"}, nil
}
