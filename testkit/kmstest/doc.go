// Package kmstest holds the key stores the KMS and PKCS#11 tests sign with,
// offline: local-kms for AWS (aws.go), Cloud KMS's gRPC service (gcp.go), a
// softhsm2 token (softhsm.go), and, here, Vault's Transit secrets engine
// over HTTP (no vault binary is packaged for this machine): the routes
// sigstore's hashivault provider uses, in Vault's wire format, with real keys.
//
//	GET  /v1/transit/keys/NAME            the key's versions and public keys
//	POST /v1/transit/sign/NAME[/HASH]     sign base64 "input" (prehashed or not)
//	POST /v1/transit/verify/NAME[/HASH]   verify a "vault:v1:..." signature
//
// Keys are "ed25519" (the public key is base64 of the raw 32 bytes, as
// Vault writes it) or "ecdsa-p256" (PEM, an ASN.1 signature). Every
// request must carry the token in X-Vault-Token; a wrong one is Vault's 403.
//
// It is test support, in testkit/ above the engine (the root package) and
// the command: only tests import it, never code that ships (TestLayers in
// internal/store). It is public because the one private place Go offers,
// internal/, holds the engine's parts below the root, and test support sits
// above the root: apart, every import runs one way. Its API follows what
// pedigree's tests need, outside the changelog's promise.
package kmstest
