package cli

import (
	"encoding/json"
	"io"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/safetext"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/tlog"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// The JSON outputs of the command: its contract (docs/CLI.md), typed and
// versioned, rendered in one place (print). Every one carries `version`; a
// field is added freely, changed only on purpose and in the changelog.

// outputVersion is the version of every JSON output of this build.
const outputVersion = 1

// v is embedded in every output: its version field.
type v struct {
	Version int `json:"version"`
}

var v1 = v{Version: outputVersion}

type (
	errorOutput struct {
		v
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
	}
	initOutput struct {
		v
		Dir               string  `json:"dir"`
		Tau               float64 `json:"tau"`
		MaxApprovalTTL    string  `json:"max_approval_ttl"`
		OperatorKey       string  `json:"operator_key"`
		TrustRoot         string  `json:"trust_root"`
		OperatorKeySHA256 string  `json:"operator_key_sha256"`
	}
	registryAddOutput struct {
		v
		ID        string `json:"id"`
		Tier      string `json:"tier"`
		Approver  bool   `json:"approver"`
		KeySHA256 string `json:"key_sha256"`
	}
	freezeOutput struct {
		v
		Frozen       bool    `json:"frozen"`
		Principals   int     `json:"principals"`
		Tau          float64 `json:"tau"`
		FreezeDigest string  `json:"freeze_digest"`
	}
	sealOutput struct {
		v
		Sealed []string `json:"sealed"`
	}
	principalOutput struct {
		ID        string `json:"id"`
		Tier      string `json:"tier"`
		PublicKey string `json:"public_key"`
		// Algorithm: "ed25519" or "ecdsa-p256".
		Algorithm string `json:"algorithm"`
		Approver  bool   `json:"approver"`
	}
	registryListOutput struct {
		v
		Frozen       bool              `json:"frozen"`
		Tau          float64           `json:"tau"`
		FreezeDigest string            `json:"freeze_digest,omitempty"`
		Principals   []principalOutput `json:"principals"`
	}
	parentOutput struct {
		ID     string  `json:"id"`
		Weight float64 `json:"weight"`
		Strong bool    `json:"strong"`
	}
	// entryOutput is an entry's summary (record), and with the show fields
	// what `lineage show` prints.
	entryOutput struct {
		v
		ID            string         `json:"id"`
		Principal     string         `json:"principal"`
		Kind          lineage.Kind   `json:"kind"`
		Session       string         `json:"session"`
		Tier          string         `json:"tier"`
		EffectiveTier string         `json:"effective_tier"`
		ReachTier     string         `json:"reach_tier"`
		Parents       []parentOutput `json:"parents"`
		*showFields
	}
	showFields struct {
		SignatureValid bool            `json:"signature_valid"`
		Time           string          `json:"time"`
		ContentDigest  string          `json:"content_digest"`
		EffectiveVia   string          `json:"effective_via"`
		ReachVia       string          `json:"reach_via"`
		Tool           string          `json:"tool,omitempty"`
		Args           json.RawMessage `json:"args,omitempty"`
		Content        *string         `json:"content,omitempty"`
		// A plan's steps; the plan step a call cites; what a rejection
		// rejects.
		Steps     []lineage.PlanStep `json:"steps,omitempty"`
		Plan      *lineage.PlanRef   `json:"plan,omitempty"`
		Rejection *lineage.Rejection `json:"rejection,omitempty"`
	}
	recallOutput struct {
		v
		Session  string   `json:"session"`
		Recalled []string `json:"recalled"`
	}
	approveOutput struct {
		v
		ApprovalID string `json:"approval_id"`
		DecisionID string `json:"decision_id"`
		Approver   string `json:"approver"`
		TTL        string `json:"ttl"`
		// What was approved: the exact call, shown before it was signed.
		Tool    string          `json:"tool"`
		Args    json.RawMessage `json:"args"`
		Session string          `json:"session"`
	}
	rejectOutput struct {
		v
		RejectionID string `json:"rejection_id"`
		DecisionID  string `json:"decision_id"`
		Rejecter    string `json:"rejecter"`
	}
	// pendingOutput is `gate pending -o json`.
	pendingOutput struct {
		v
		Pending []gate.Pending `json:"pending"`
	}
	decisionsOutput struct {
		v
		Decisions []gate.Decision `json:"decisions"`
		// Reviews are the approvals and rejections of the decisions shown.
		Reviews []gate.Review `json:"reviews"`
	}
	traceNodeOutput struct {
		ID            string       `json:"id"`
		Principal     string       `json:"principal"`
		Kind          lineage.Kind `json:"kind"`
		Tier          string       `json:"tier"`
		EffectiveTier string       `json:"effective_tier"`
		ReachTier     string       `json:"reach_tier"`
	}
	traceOutput struct {
		v
		ID            string            `json:"id"`
		EffectiveTier string            `json:"effective_tier"`
		ReachTier     string            `json:"reach_tier"`
		Nodes         []traceNodeOutput `json:"nodes"`
		Edges         []lineage.Edge    `json:"edges"`
		Untrusted     []lineage.Source  `json:"untrusted"`
		Truncated     bool              `json:"truncated"`
	}
	verifyOutput struct {
		v
		OK       bool              `json:"ok"`
		Entries  int               `json:"entries"`
		Problems []lineage.Problem `json:"problems"`
		// TrustRoot: "pinned key", "pinned digest" or "none".
		TrustRoot string `json:"trust_root"`
		// Checkpoints is how many checkpoints kept elsewhere were checked.
		Checkpoints int `json:"checkpoints"`
		// LogSize is the log's leaves; Witnessed how many of them a
		// checkpoint kept elsewhere (a witness) vouches for; Unwitnessed
		// the tail after it, which only a later checkpoint protects.
		LogSize     uint64 `json:"log_size"`
		Witnessed   uint64 `json:"witnessed"`
		Unwitnessed uint64 `json:"unwitnessed"`
	}
	refusalsOutput struct {
		v
		Refusals []pedigree.Refusal `json:"refusals"`
	}
	checkpointOutput struct {
		v
		Checkpoint *tlog.Checkpoint `json:"checkpoint"`
	}
	headOutput struct {
		v
		Size uint64 `json:"size"`
		Root string `json:"root"`
	}
	proofOutput struct {
		v
		Verified bool `json:"verified"`
		Proof    any  `json:"proof"`
	}
	serveOutput struct {
		v
		Socket string `json:"socket"`
		Addr   string `json:"addr"`
	}
	demoOutput struct {
		v
		OK    bool       `json:"ok"`
		Dir   string     `json:"dir"`
		Steps []demoStep `json:"steps"`
	}
	trajectoryShowOutput struct {
		v
		Session  string             `json:"session"`
		Calls    []trajectory.Call  `json:"calls"`
		Features map[string]float64 `json:"features"`
		Alerts   []trajectory.Alert `json:"alerts"`
	}
	trainOutput struct {
		v
		Model     string  `json:"model"`
		Sessions  int     `json:"sessions"`
		Threshold float64 `json:"threshold"`
	}
)

// print renders out as indented JSON with -o json, else calls text. Text
// is for a terminal: what it prints goes through a safetext.Writer, which
// shows every control character (an ESC sequence in stored content, a bidi
// override in a tool name) escaped and ends with a note saying how many it
// escaped. JSON stays exact: encoding/json escapes what needs escaping.
func (a *app) print(out any, text func(w io.Writer)) error {
	if a.output == "json" || text == nil {
		return a.printJSON(out)
	}
	return a.text(text)
}

// text calls print through a safetext.Writer on the standard output.
func (a *app) text(print func(w io.Writer)) error {
	return safeText(a.out, print)
}

// safeText calls print through a safetext.Writer on w, then writes the note.
func safeText(w io.Writer, print func(w io.Writer)) error {
	sw := safetext.NewWriter(w)
	print(sw)
	return sw.Close()
}

// line is s escaped for one line of text output (a reason, a value: a
// newline in it must not start a line of its own), counted in the note of
// the writer w when w is one.
func line(w io.Writer, s string) string {
	if sw, ok := w.(*safetext.Writer); ok {
		return sw.Line(s)
	}
	e, _ := safetext.Escape(s, safetext.Line)
	return e
}

// counted adds n characters escaped elsewhere to w's note.
func counted(w io.Writer, n int) {
	if sw, ok := w.(*safetext.Writer); ok {
		sw.Count(n)
	}
}

// printJSON renders out as indented JSON whatever -o says (trace --format).
func (a *app) printJSON(out any) error {
	enc := json.NewEncoder(a.out)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// entryJSON is an entry's summary, as record and lineage show print it.
func entryJSON(n *lineage.Node, edges []lineage.Edge) entryOutput {
	ps := make([]parentOutput, 0, len(edges))
	for _, e := range edges {
		ps = append(ps, parentOutput{ID: e.Parent, Weight: e.Weight, Strong: e.Strong})
	}
	return entryOutput{v: v1, ID: n.ID, Principal: n.Principal, Kind: n.Kind, Session: n.Session,
		Tier: n.Tier.String(), EffectiveTier: n.Effective.String(), ReachTier: n.Reach.String(), Parents: ps}
}
