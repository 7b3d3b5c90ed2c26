package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
	"github.com/pedigree-ai/pedigree/tlog"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// Limits on requests.
const (
	// MaxRequestBytes bounds a request body: an envelope plus its content,
	// base64-encoded, with room to spare.
	MaxRequestBytes = lineage.MaxEnvelopeBytes + lineage.MaxContentBytes*4/3 + 64<<10
)

// Request and response bodies.
type (
	insertRequest struct {
		Envelope json.RawMessage `json:"envelope"`
		Content  []byte          `json:"content,omitempty"` // base64 in JSON
	}
	recallRequest struct {
		Session string   `json:"session"`
		IDs     []string `json:"ids"`
	}
	checkRequest struct {
		Call       json.RawMessage     `json:"call"`
		ArgSources map[string][]string `json:"arg_sources,omitempty"`
	}
	approveRequest struct {
		Envelope json.RawMessage `json:"envelope"`
	}
	checkpointRequest struct {
		Checkpoint tlog.Checkpoint `json:"checkpoint"`
	}
	verifyRequest struct {
		Checkpoints []tlog.Checkpoint `json:"checkpoints,omitempty"`
	}
	proveAgainstRequest struct {
		ID         string          `json:"id"`
		Checkpoint tlog.Checkpoint `json:"checkpoint"`
	}
	consistencyFromRequest struct {
		Checkpoint tlog.Checkpoint `json:"checkpoint"`
		New        uint64          `json:"new,omitempty"`
	}
	registryResponse struct {
		Frozen     bool                `json:"frozen"`
		Tau        float64             `json:"tau"`
		Principals []principalResponse `json:"principals"`
		// FreezeDigest, MaxApprovalTTL and TrustRoot: see pedigree.RegistryView.
		OperatorKey    string `json:"operator_key,omitempty"`
		FreezeDigest   string `json:"freeze_digest,omitempty"`
		MaxApprovalTTL string `json:"max_approval_ttl,omitempty"`
		TrustRoot      string `json:"trust_root,omitempty"`
	}
	principalResponse struct {
		ID        string        `json:"id"`
		Tier      registry.Tier `json:"tier"`
		PublicKey string        `json:"public_key"`
		Approver  bool          `json:"approver,omitempty"`
	}
	traceResponse struct {
		Root      *lineage.Node    `json:"root"`
		Nodes     []*lineage.Node  `json:"nodes"`
		Edges     []lineage.Edge   `json:"edges"`
		Untrusted []lineage.Source `json:"untrusted"`
		Truncated bool             `json:"truncated"`
	}
	trajectoryResponse struct {
		State  trajectory.State   `json:"state"`
		Calls  []trajectory.Call  `json:"calls"`
		Alerts []trajectory.Alert `json:"alerts"`
	}
	refusalsResponse struct {
		Refusals []pedigree.Refusal `json:"refusals"`
	}
	headResponse struct {
		Size uint64 `json:"size"`
		Root string `json:"root"`
	}
	errorResponse struct {
		Error string `json:"error"`
		Kind  string `json:"kind"`
	}
)

// errorKinds maps the engine's sentinel errors to a kind and a status, both
// ways: the server names the kind, the client wraps the same sentinel.
var errorKinds = []struct {
	kind   string
	err    error
	status int
}{
	{"tampered", registry.ErrTampered, http.StatusConflict},
	{"frozen", registry.ErrFrozen, http.StatusConflict},
	{"not_frozen", registry.ErrNotFrozen, http.StatusConflict},
	{"unknown_principal", registry.ErrUnknownPrincipal, http.StatusForbidden},
	{"bad_signature", registry.ErrBadSignature, http.StatusForbidden},
	{"bad_key", registry.ErrBadKey, http.StatusBadRequest},
	{"bad_id", registry.ErrBadID, http.StatusBadRequest},
	{"bad_tier", registry.ErrBadTier, http.StatusBadRequest},
	{"unknown_parent", lineage.ErrUnknownParent, http.StatusUnprocessableEntity},
	{"unknown_entry", lineage.ErrUnknownEntry, http.StatusNotFound},
	{"ambiguous", lineage.ErrAmbiguous, http.StatusBadRequest},
	{"not_logged", tlog.ErrNotLogged, http.StatusNotFound},
	{"no_checkpoint", tlog.ErrNoCheckpoint, http.StatusNotFound},
	{"not_extension", tlog.ErrNotExtension, http.StatusConflict},
	{"checkpoint_exists", tlog.ErrCheckpointExists, http.StatusConflict},
	{"malformed", lineage.ErrMalformed, http.StatusBadRequest},
	{"malformed", tlog.ErrMalformed, http.StatusBadRequest},
	{"unknown_decision", gate.ErrUnknownDecision, http.StatusNotFound},
	{"approval", gate.ErrApproval, http.StatusBadRequest},
	{"rejected", gate.ErrRejected, http.StatusConflict},
	{"review_tampered", gate.ErrReviewTampered, http.StatusInternalServerError},
	{"disk_full", pedigree.ErrDiskFull, http.StatusInsufficientStorage},
}

func classify(err error) (string, int) {
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			return k.kind, k.status
		}
	}
	return "internal", http.StatusInternalServerError
}

// RemoteError is an error the server returned. It unwraps to the engine's
// sentinel error of its kind, so errors.Is works across the socket.
type RemoteError struct {
	Status int
	Kind   string
	Msg    string
}

func (e *RemoteError) Error() string { return e.Msg }

func (e *RemoteError) Unwrap() error {
	for _, k := range errorKinds {
		if k.kind == e.Kind {
			return k.err
		}
	}
	return nil
}
