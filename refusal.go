package pedigree

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// The refusal log records every write the engine refused for a reason that
// an attacker would cause: a forged signature, an unknown principal, a key
// that is not the principal's, a registration after freeze, a bad approval,
// a call entry the gate refused. Each row holds the claimed principal, the
// reason and the sha256 of the payload, never the payload or a key, and is
// written in one transaction of its own (nothing of the refused write is
// stored). It is bounded: past MaxRefusals rows the oldest are dropped.
//
// Namespace store.Refusals (owner: this file, the engine):
//
//	<seq, 8 bytes big-endian> -> Refusal (JSON)
//	next                      -> the next seq (8 bytes)
//
// Authentication: none, and none is needed: it is evidence that someone
// tried, for an operator to read; no decision ever reads it, and a writer of
// the data directory who deletes rows hides only their own attempts.
var keyRefusalNext = []byte("next")

// refusalKey is a refusal row's key; every row key is 8 bytes, "next" is 4.
func refusalKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// MaxRefusals bounds the refusal log.
const MaxRefusals = 10000

// Refusal is one refused write.
type Refusal struct {
	Time      string `json:"time"`
	Principal string `json:"principal"`
	// Kind is the class of refusal (bad_signature, unknown_principal,
	// bad_key, frozen, approval, refused_call); Reason is the error.
	Kind          string `json:"kind"`
	Reason        string `json:"reason"`
	PayloadDigest string `json:"payload_digest"`
}

var refusalKinds = []struct {
	kind string
	err  error
}{
	{"bad_signature", registry.ErrBadSignature},
	{"unknown_principal", registry.ErrUnknownPrincipal},
	{"bad_key", registry.ErrBadKey},
	{"frozen", registry.ErrFrozen},
	{"approval", gate.ErrApproval},
}

// refusalKind is the class of err, "" when err is not a refusal worth
// logging (bad input, a full disk, a cancelled request).
func refusalKind(err error) string {
	for _, k := range refusalKinds {
		if errors.Is(err, k.err) {
			return k.kind
		}
	}
	return ""
}

// refused logs err when it is a refusal, and returns it unchanged.
func (e *Engine) refused(ctx context.Context, err error, principal string, payload []byte) error {
	if kind := refusalKind(err); kind != "" {
		e.logRefusal(ctx, kind, principal, err.Error(), payload)
	}
	return err
}

// claimed is the principal an envelope claims, read without verifying.
func claimed(env []byte) string {
	if st, _, _, err := lineage.Open(env); err == nil {
		return st.Principal
	}
	return ""
}

func (e *Engine) logRefusal(ctx context.Context, kind, principal, reason string, payload []byte) {
	sum := sha256.Sum256(payload)
	r := Refusal{Time: lineage.FormatTime(e.cfg.clock()), Principal: principal, Kind: kind, Reason: reason, PayloadDigest: hex.EncodeToString(sum[:])}
	b, _ := json.Marshal(r)
	e.refusals.Add(1)
	// Logged even when the request that was refused is cancelled.
	err := e.db.Space(store.Refusals).Commit(context.WithoutCancel(ctx), len(b)+32, func(t kv.Txn) error {
		var seq uint64
		if v, err := t.Get(keyRefusalNext); err == nil && len(v) == 8 {
			seq = binary.BigEndian.Uint64(v)
		} else if err != nil && !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		if err := t.Set(keyRefusalNext, binary.BigEndian.AppendUint64(nil, seq+1)); err != nil {
			return err
		}
		if err := t.Set(refusalKey(seq), b); err != nil {
			return err
		}
		// Rows are numbered without gaps, so the one that falls out of the
		// bound is known: the log never holds more than MaxRefusals.
		if seq >= MaxRefusals {
			return t.Delete(refusalKey(seq - MaxRefusals))
		}
		return nil
	})
	// The refusal stands whether or not it could be logged; say so.
	if err != nil {
		e.cfg.log.Error("refusal not logged", "kind", kind, "principal", principal, "error", err)
	}
	e.cfg.log.Warn("write refused", "kind", kind, "principal", principal, "payload_sha256", r.PayloadDigest, "reason", reason)
}

// RefusalCount is how many refusals this engine has logged since it was
// opened (the server exports it as a metric).
func (e *Engine) RefusalCount() uint64 { return e.refusals.Load() }

// Refusals lists the refusal log, oldest first; limit > 0 keeps the last
// limit.
func (e *Engine) Refusals(ctx context.Context, limit int) ([]Refusal, error) {
	out := []Refusal{}
	err := e.db.Space(store.Refusals).View(func(t kv.Txn) error {
		return t.Iterate(nil, true, func(k, v []byte) error {
			if len(k) != 8 {
				return nil
			}
			var r Refusal
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("refusal log: %w", err)
			}
			out = append(out, r)
			return ctx.Err()
		})
	})
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, err
}
