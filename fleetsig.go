package pedigree

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/pedigree-ai/pedigree/internal/fleet"
)

// A fleet node signs every record it publishes with its own engine key,
// and every node refuses a record that no certified engine key signed.
//
// Each node has an engine key of its own (its keys directory, like a local
// engine's). Its public half is certified the way every key of a fleet is:
// it is a principal of the registry (engine:<node>, tier external) frozen
// by the operator before the fleet starts, so it is in the stream's genesis
// and every node knows it. Adding a node to a running fleet is not
// possible (the registry cannot change after the genesis); a fleet is
// seeded with the engine key of every node it will have.
//
// On the wire a record is
//
//	{"version":2,"engine":<DSSE envelope>,"record":<the record>}
//
// where the envelope (payload type fleetRecordPayloadType) is signed by the
// publishing node's engine key over its principal, the record's kind and
// subject key, and the SHA-256 of the record's bytes exactly as they stand
// after "record":. So a record cannot be altered, moved to another subject
// (a decision onto an approval's use subject) or published by anyone
// without a certified engine key; a writer with publish rights alone can
// only copy a node's record onto its own subject again, which apply stores
// once (or refuses, for a second use of an approval).

// fleetRecordPayloadType is the DSSE payload type of a record's signature.
const fleetRecordPayloadType = "application/vnd.pedigree.fleet-record+json"

// fleetRecordVersion is the version of a signed record on the wire
// (version 1 was the unsigned record of earlier releases: refused).
const fleetRecordVersion = 2

// recordSignature is what a node signs for a record it publishes.
type recordSignature struct {
	Node   string `json:"node"`
	Kind   string `json:"kind"`
	Key    string `json:"key"`
	SHA256 string `json:"sha256"`
}

// signedRecord is a record as it travels on the stream.
type signedRecord struct {
	Version int             `json:"version"`
	Engine  json.RawMessage `json:"engine"`
	Record  json.RawMessage `json:"record"`
}

// ErrUncertifiedEngine: a fleet node has no engine key that the fleet's
// registry certifies, so it could publish nothing its peers accept.
var ErrUncertifiedEngine = errors.New("this node's engine key is not certified by the fleet's registry")

// sealRecord signs a record this node publishes as kind, keyed key.
func (e *Engine) sealRecord(kind fleet.Kind, key string, rec []byte) ([]byte, error) {
	if e.engine == nil {
		if e.engineErr != nil {
			return nil, e.engineErr
		}
		return nil, ErrNoEngineKey
	}
	sum := sha256.Sum256(rec)
	payload, err := json.Marshal(recordSignature{Node: e.engineID, Kind: string(kind), Key: key, SHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		return nil, err
	}
	env, err := e.engine.SignEnvelope(fleetRecordPayloadType, payload)
	if err != nil {
		return nil, err
	}
	// Built by hand so that the record's bytes are exactly those signed.
	out := make([]byte, 0, len(env)+len(rec)+40)
	out = append(out, `{"version":2,"engine":`...)
	out = append(out, env...)
	out = append(out, `,"record":`...)
	out = append(out, rec...)
	return append(out, '}'), nil
}

// openRecord checks the engine signature of a record from the stream
// published as kind, keyed key, and returns the record's bytes and the
// engine principal that signed it. An unsigned record, one signed by a key
// that is not a certified engine key, and one signed for another subject
// or other bytes are refused.
func (e *Engine) openRecord(kind fleet.Kind, key string, data []byte) ([]byte, string, error) {
	var w signedRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil || dec.More() {
		return nil, "", fmt.Errorf("%w: the record is not a signed record (version %d): %v", errUnsignedRecord, fleetRecordVersion, err)
	}
	if w.Version != fleetRecordVersion || len(w.Engine) == 0 {
		return nil, "", fmt.Errorf("%w: a version %d record with no engine signature", errUnsignedRecord, w.Version)
	}
	// A DSSE envelope with one signature, checked here (the same PAE as
	// sigstore's wrapper, without its copies): the signer it names is read
	// first only to pick the one key to check it with.
	var env struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
		Signatures  []struct {
			KeyID string `json:"keyid"`
			Sig   string `json:"sig"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(w.Engine, &env); err != nil || env.PayloadType != fleetRecordPayloadType || len(env.Signatures) != 1 {
		return nil, "", fmt.Errorf("%w: the engine signature is not one DSSE signature of a fleet record (%v)", errUnsignedRecord, err)
	}
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return nil, "", fmt.Errorf("%w: the engine signature's payload: %v", errUnsignedRecord, err)
	}
	sig, err := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	if err != nil {
		return nil, "", fmt.Errorf("%w: the engine signature: %v", errUnsignedRecord, err)
	}
	var a recordSignature
	if err := json.Unmarshal(payload, &a); err != nil {
		return nil, "", fmt.Errorf("%w: the engine signature's payload does not decode: %v", errUnsignedRecord, err)
	}
	pub := e.engineKey(a.Node)
	if len(pub) != ed25519.PublicKeySize {
		return nil, "", fmt.Errorf("%w: signed as %q, which is not an engine key the fleet's registry certifies", errUnsignedRecord, a.Node)
	}
	if !ed25519.Verify(pub, pae(fleetRecordPayloadType, payload), sig) {
		return nil, "", fmt.Errorf("%w: the signature of %s does not verify", errUnsignedRecord, a.Node)
	}
	sum := sha256.Sum256(w.Record)
	if a.Kind != string(kind) || a.Key != key || a.SHA256 != hex.EncodeToString(sum[:]) {
		return nil, "", fmt.Errorf("%w: %s signed a %s record keyed %s, not these bytes on this subject", errUnsignedRecord, a.Node, a.Kind, a.Key)
	}
	return w.Record, a.Node, nil
}

// pae is DSSE's pre-authentication encoding of a payload.
func pae(payloadType string, payload []byte) []byte {
	b := make([]byte, 0, 32+len(payloadType)+len(payload))
	b = append(b, "DSSEv1 "...)
	b = strconv.AppendInt(b, int64(len(payloadType)), 10)
	b = append(b, ' ')
	b = append(b, payloadType...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(payload)), 10)
	b = append(b, ' ')
	return append(b, payload...)
}

// errUnsignedRecord: a record on the fleet's stream that no certified
// engine key signed as it stands.
var errUnsignedRecord = errors.New("not signed by a certified fleet node")

// engineKey is the public key of engine principal id (nil when the
// registry certifies no such engine key).
func (e *Engine) engineKey(id string) ed25519.PublicKey {
	e.engineVerifiers()
	return e.engineKeyByID[id]
}
