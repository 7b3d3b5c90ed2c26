package gate

import (
	"context"

	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/open-policy-agent/opa/v1/ast"
	"strings"
	"time"

	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/trajectory"
)

// Request is a proposed tool call: a signed call entry (whose parents are
// the call's justification) and, optionally, where each argument's value
// came from.
type Request struct {
	Call []byte
	// Signed, when set instead of Call, is a call entry this process has
	// just signed with an in-process key: the graph checks the key against
	// the registry instead of verifying the envelope again.
	Signed *lineage.Signed
	// ArgSources maps an argument name to the full IDs of the entries its
	// value came from. An argument not named here is taken to come from the
	// whole justification.
	ArgSources map[string][]string
}

// Decision is the gate's answer, as logged and as printed.
type Decision struct {
	Version       int              `json:"version"`
	Decision      string           `json:"decision"`
	ID            string           `json:"decision_id"`
	CallID        string           `json:"call_id"`
	Tool          string           `json:"tool"`
	Reasons       []string         `json:"reasons"`
	Untrusted     []lineage.Source `json:"untrusted"`
	Warnings      []string         `json:"warnings"`
	PolicyVersion string           `json:"policy_version"`
	Approval      string           `json:"approval,omitempty"`
	Principal     string           `json:"principal"`
	Session       string           `json:"session"`
	Time          string           `json:"time"`
	ArgsDigest    string           `json:"args_digest"`
	Justification []string         `json:"justification"`
	// Plan is the plan step the call cites, and whether it stood as the
	// control justification.
	Plan *PlanUse `json:"plan,omitempty"`
	// InputDigest is the sha256 of the policy input as logged, so that the
	// decision's ID covers what the policy saw.
	InputDigest string `json:"input_digest,omitempty"`
}

// record is a logged decision: the decision and the exact input the policy
// saw, so it can be evaluated again.
type record struct {
	Decision
	Input json.RawMessage
}

// Gate key layout.
const (
	pDecision    = "g/"  // g/<decision id> -> the decision's JSON without its ID: the bytes its ID hashes
	pInput       = "gi/" // gi/<decision id> -> the policy input it was made on
	pDecisionSeq = "gq/" // gq/<seq> -> decision id
	pApproval    = "a/"  // a/<session>\x00<action>\x00<approval id> -> expiry
	pUsed        = "au/" // au/<approval id> -> decision id that used it
	pTrajectory  = "t/"  // t/<session> -> trajectory.State
)

var errApprovalRace = errors.New("approval used concurrently")

// Check decides on a proposed call. It verifies the call entry, builds the
// policy input from lineage and evaluates the policy, then stores the call
// entry, the decision, the session's trajectory and the use of an approval
// in one durable commit. Every failure to decide is a deny with its cause in
// the reasons; an error is returned only when the call cannot be read or
// the decision cannot be stored, and the caller must treat that as a deny.
func (g *Gate) Check(ctx context.Context, req Request) (*Decision, error) {
	now := g.clock()
	// Prepare decodes and verifies the envelope; only when it refuses the
	// call is the envelope decoded apart, to log the deny.
	var pending *lineage.Pending
	var err error
	if req.Signed != nil {
		pending, err = g.graph.PrepareSigned(ctx, req.Signed, nil)
	} else {
		pending, err = g.graph.Prepare(ctx, req.Call, nil)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		var st *lineage.Statement
		var callID string
		if req.Signed != nil {
			if st, callID = req.Signed.Statement(), req.Signed.ID(); st == nil {
				return nil, err
			}
		} else {
			var oerr error
			if st, _, callID, oerr = lineage.Open(req.Call); oerr != nil {
				return nil, oerr
			}
		}
		if st.Kind != lineage.KindCall {
			return nil, notACall(st.Kind)
		}
		return g.deny(ctx, newDecision(st, callID, now, g.version), nil, "the call entry was refused: "+err.Error())
	}
	st := pending.Statement
	if st.Kind != lineage.KindCall {
		return nil, notACall(st.Kind)
	}
	d := newDecision(st, pending.Node.ID, now, g.version)
	for attempt := 0; ; attempt++ {
		in, tcall, err := g.decide(ctx, st, pending.Node, req.ArgSources, now, d)
		if err != nil {
			return g.deny(ctx, d, in, err.Error())
		}
		err = g.store(ctx, d, in, tcall, pending)
		if errors.Is(err, errApprovalRace) && attempt < 3 {
			continue
		}
		if err != nil {
			return nil, err
		}
		return d, nil
	}
}

func notACall(k lineage.Kind) error {
	return fmt.Errorf("%w: the gate checks call entries, not %s", lineage.ErrMalformed, k)
}

// Decide is the decision alone: the lineage look-ups, the input and the
// policy evaluation for a call statement, with nothing verified or stored
// (no signature, no decision log, no approval used). For benchmarks and dry
// runs; Check is what guards a tool.
func (g *Gate) Decide(ctx context.Context, st *lineage.Statement, argSources map[string][]string) (*Decision, error) {
	call, err := g.graph.Preview(st)
	if err != nil {
		return nil, err
	}
	now := g.clock()
	d := newDecision(st, call.ID, now, g.version)
	if _, _, err := g.decide(ctx, st, call, argSources, now, d); err != nil {
		d.Decision, d.Reasons, d.Approval = Deny, []string{"fail closed: " + err.Error()}, ""
	}
	return d, nil
}

func newDecision(st *lineage.Statement, callID string, now time.Time, version string) *Decision {
	d := &Decision{
		Version: 1, CallID: callID, Tool: st.Tool, Principal: st.Principal, Session: st.Session,
		Time: lineage.FormatTime(now), ArgsDigest: lineage.ActionDigest(st.Tool, st.Args),
		PolicyVersion: version, Reasons: []string{}, Warnings: []string{}, Untrusted: []lineage.Source{},
		Justification: make([]string, 0, len(st.Parents)),
	}
	for _, p := range st.Parents {
		d.Justification = append(d.Justification, p.ID)
	}
	return d
}

// decide builds the input and evaluates the policy, filling in d. It
// returns the input (nil when it could not be built) and the trajectory
// call the decision appends.
func (g *Gate) decide(ctx context.Context, st *lineage.Statement, call *lineage.Node, argSources map[string][]string, now time.Time, d *Decision) (ast.Value, *trajectory.Call, error) {
	in, tcall, err := g.input(ctx, st, call, argSources, now, d)
	if err != nil {
		return nil, nil, err
	}
	v, err := g.eval(ctx, in, now)
	if err != nil {
		return in, nil, err
	}
	d.Decision, d.Reasons, d.Approval = v.Decision, v.Reasons, ""
	d.Warnings = v.Warnings
	if d.Warnings == nil {
		d.Warnings = []string{}
	}
	if v.Approval != "" {
		if v.Decision != Allow || !approvalOffered(in, v.Approval) {
			return in, nil, errors.New("the policy named an approval that was not offered to it")
		}
		d.Approval = v.Approval
	}
	return in, tcall, nil
}

// deny logs a fail-closed decision. The call entry is not stored: it was
// refused, or nothing was decided on it.
func (g *Gate) deny(ctx context.Context, d *Decision, in ast.Value, cause string) (*Decision, error) {
	d.Decision, d.Approval = Deny, ""
	d.Reasons = []string{"fail closed: " + cause}
	d.Warnings = []string{}
	if err := g.store(ctx, d, in, nil, nil); err != nil {
		return nil, err
	}
	g.log.Warn("gate failed closed", "call", d.CallID, "tool", d.Tool, "cause", cause)
	return d, nil
}

// store writes the call entry (when given), the decision, the use of its
// approval and the call's step in its session's trajectory, in one durable
// transaction.
func (g *Gate) store(ctx context.Context, d *Decision, in ast.Value, tcall *trajectory.Call, call *lineage.Pending) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var inBytes []byte
	if in != nil {
		var err error
		if inBytes, err = appendJSON(make([]byte, 0, 4096), in); err != nil {
			return err
		}
	}
	d.ID, d.InputDigest = "", ""
	if inBytes != nil {
		s := sha256.Sum256(inBytes)
		d.InputDigest = hex.EncodeToString(s[:])
	}
	body, err := json.Marshal(d)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	d.ID = hex.EncodeToString(sum[:])
	return g.graph.Commit(ctx, func(t *store.Txn) error {
		if call != nil {
			if err := call.Write(t); err != nil {
				return err
			}
		}
		if d.Approval != "" {
			used := []byte(pUsed + d.Approval)
			if ok, err := t.Has(used); err != nil {
				return err
			} else if ok {
				return errApprovalRace
			}
			if err := t.Set(used, []byte(d.ID)); err != nil {
				return err
			}
		}
		seq, err := g.db.NextSeq()
		if err != nil {
			return err
		}
		if err := t.Set([]byte(pDecision+d.ID), body); err != nil {
			return err
		}
		if inBytes != nil {
			if err := t.Set([]byte(pInput+d.ID), inBytes); err != nil {
				return err
			}
		}
		if err := g.graph.AppendLog(t, lineage.LeafDecision, d.ID); err != nil {
			return err
		}
		if err := t.Set(binary.BigEndian.AppendUint64([]byte(pDecisionSeq), seq), []byte(d.ID)); err != nil {
			return err
		}
		if tcall != nil && d.Session != "" {
			_, err := g.appendTrajectory(t, d.Session, *tcall)
			return err
		}
		return nil
	}, len(body)+len(inBytes)+1024)
}

// internal reports whether a recipient is in one of the operator's domains.
func (c *Catalog) internal(rcpt string) bool {
	_, domain, ok := strings.Cut(strings.ToLower(rcpt), "@")
	if !ok {
		return false
	}
	for _, d := range c.InternalDomains {
		d = strings.ToLower(d)
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}

// PreparedInput is a policy input built once, to measure the bare policy
// evaluation against whole decisions.
type PreparedInput struct {
	g   *Gate
	in  ast.Value
	now time.Time
}

// Input builds the policy input for a call statement, storing nothing.
func (g *Gate) Input(ctx context.Context, st *lineage.Statement, argSources map[string][]string) (*PreparedInput, error) {
	call, err := g.graph.Preview(st)
	if err != nil {
		return nil, err
	}
	now := g.clock()
	in, _, err := g.input(ctx, st, call, argSources, now, newDecision(st, call.ID, now, g.version))
	if err != nil {
		return nil, err
	}
	return &PreparedInput{g: g, in: in, now: now}, nil
}

// Eval evaluates the policy on the prepared input.
func (p *PreparedInput) Eval(ctx context.Context) error {
	_, err := p.g.eval(ctx, p.in, p.now)
	return err
}
