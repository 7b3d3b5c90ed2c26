// Package registry holds the principals (who writes entries), their tiers
// and public keys, and the freeze.
//
// Principals are registered at bootstrap by the operator; then the registry
// is frozen: the operator key signs a manifest of every principal (ID, tier,
// key fingerprint) and τ, the strong-edge threshold. After that no call can
// add, remove or change a principal, and Load refuses a store whose
// principal rows no longer match the signed manifest, saying what differs
// (*TamperError). The tier of an entry is always its signer's tier, looked
// up here; a caller never chooses it.
//
// Keys are Ed25519 through sigstore's signature package, with the algorithm
// pinned. Private keys stay with whoever signs (a Signer); the store keeps
// public keys only. Entries are DSSE envelopes whose payload type is always
// checked on verify (Verifier.VerifyEnvelope).
//
// The registry keeps its rows in its own namespace of the store through the
// kv contract (Bootstrap, Load), so it is callable from outside the module;
// the engine is its usual assembler.
package registry
