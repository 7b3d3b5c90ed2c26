package gate

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
}

// record is a logged decision: the decision and the exact input the policy
// saw, so it can be evaluated again.
type record struct {
	Decision
	Input json.RawMessage `json:"input,omitempty"`
}

// Gate key layout.
const (
	pDecision    = "g/"  // g/<decision id> -> record
	pDecisionSeq = "gq/" // gq/<seq> -> decision id
	pApproval    = "a/"  // a/<session>\x00<action>\x00<approval id> -> expiry
	pUsed        = "au/" // au/<approval id> -> decision id that used it
	pTrajectory  = "t/"  // t/<session> -> trajectory.State
)

var errApprovalRace = errors.New("approval used concurrently")

// Check decides on a proposed call. It records the call entry, builds the
// policy input from lineage, evaluates the policy and logs the decision.
// Every failure to decide is a deny with its cause in the reasons; an error
// is returned only when the call cannot be read or the decision cannot be
// logged, and the caller must treat that as a deny too.
func (g *Gate) Check(ctx context.Context, req Request) (*Decision, error) {
	st, _, callID, err := lineage.Open(req.Call)
	if err != nil {
		return nil, err
	}
	if st.Kind != lineage.KindCall {
		return nil, fmt.Errorf("%w: the gate checks call entries, not %s", lineage.ErrMalformed, st.Kind)
	}
	now := g.clock()
	d := &Decision{
		Version: 1, CallID: callID, Tool: st.Tool, Principal: st.Principal, Session: st.Session,
		Time: lineage.FormatTime(now), ArgsDigest: lineage.ActionDigest(st.Tool, st.Args),
		PolicyVersion: g.version, Reasons: []string{}, Warnings: []string{}, Untrusted: []lineage.Source{},
	}
	for _, p := range st.Parents {
		d.Justification = append(d.Justification, p.ID)
	}
	if d.Justification == nil {
		d.Justification = []string{}
	}
	call, err := g.graph.Insert(ctx, req.Call, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return g.deny(ctx, d, nil, "the call entry was refused: "+err.Error())
	}
	for attempt := 0; ; attempt++ {
		in, tcall, err := g.input(ctx, st, call, req.ArgSources, now, d)
		if err != nil {
			return g.deny(ctx, d, nil, err.Error())
		}
		v, err := g.eval(ctx, in, now)
		if err != nil {
			return g.deny(ctx, d, in, err.Error())
		}
		d.Decision, d.Reasons, d.Approval = v.Decision, v.Reasons, ""
		d.Warnings = v.Warnings
		if d.Warnings == nil {
			d.Warnings = []string{}
		}
		if v.Approval != "" {
			if v.Decision != Allow || !approvalOffered(in, v.Approval) {
				return g.deny(ctx, d, in, "the policy named an approval that was not offered to it")
			}
			d.Approval = v.Approval
		}
		err = g.logDecision(ctx, d, in, tcall)
		if errors.Is(err, errApprovalRace) && attempt < 3 {
			continue
		}
		if err != nil {
			return nil, err
		}
		return d, nil
	}
}

func approvalOffered(in map[string]any, id string) bool {
	for _, a := range in["approvals"].([]any) {
		if a.(map[string]any)["id"] == id {
			return true
		}
	}
	return false
}

// deny logs a fail-closed decision.
func (g *Gate) deny(ctx context.Context, d *Decision, in map[string]any, cause string) (*Decision, error) {
	d.Decision, d.Approval = Deny, ""
	d.Reasons = []string{"fail closed: " + cause}
	if err := g.logDecision(ctx, d, in, nil); err != nil {
		return nil, err
	}
	g.log.Warn("gate failed closed", "call", d.CallID, "tool", d.Tool, "cause", cause)
	return d, nil
}

// logDecision stores the decision, consumes the approval it used and appends the
// call to its session's trajectory, in one transaction.
func (g *Gate) logDecision(ctx context.Context, d *Decision, in map[string]any, tcall *trajectory.Call) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var inBytes []byte
	if in != nil {
		var err error
		if inBytes, err = json.Marshal(in); err != nil {
			return err
		}
	}
	d.ID = ""
	body, err := json.Marshal(d)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	d.ID = hex.EncodeToString(sum[:])
	rec, err := json.Marshal(record{Decision: *d, Input: inBytes})
	if err != nil {
		return err
	}
	return g.db.Update(func(t *store.Txn) error {
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
		if err := t.Set([]byte(pDecision+d.ID), rec); err != nil {
			return err
		}
		if err := t.Set(binary.BigEndian.AppendUint64([]byte(pDecisionSeq), seq), []byte(d.ID)); err != nil {
			return err
		}
		if tcall != nil && d.Session != "" {
			_, err := appendTrajectory(t, d.Session, *tcall, g.model)
			return err
		}
		return nil
	})
}

// input builds the policy input from lineage. It returns the trajectory call
// that the decision will append.
func (g *Gate) input(ctx context.Context, st *lineage.Statement, call *lineage.Node, argSources map[string][]string, now time.Time, d *Decision) (map[string]any, *trajectory.Call, error) {
	tool, known := g.catalog.Lookup(st.Tool)
	var args map[string]any
	if err := json.Unmarshal(st.Args, &args); err != nil {
		return nil, nil, fmt.Errorf("call arguments: %v", err)
	}
	just, err := g.graph.Nodes(d.Justification)
	if err != nil {
		return nil, nil, fmt.Errorf("justification: %v", err)
	}
	entries := make(map[string]map[string]any, len(just))
	justVals := make([]any, 0, len(just))
	d.Untrusted = d.Untrusted[:0]
	for _, n := range just {
		e, srcs, err := g.entryValue(n)
		if err != nil {
			return nil, nil, err
		}
		entries[n.ID] = e
		justVals = append(justVals, e)
		for _, s := range srcs {
			s.Path = append([]string{call.ID}, s.Path...)
			d.Untrusted = append(d.Untrusted, s)
		}
	}
	// Each argument's provenance: the entries it was said to come from, or
	// the whole justification.
	names := make([]string, 0, len(args)+len(argSources))
	for n := range args {
		names = append(names, n)
	}
	for n := range argSources {
		if _, ok := args[n]; !ok {
			return nil, nil, fmt.Errorf("provenance given for argument %q, which the call does not have", n)
		}
	}
	slices.Sort(names)
	arguments := make(map[string]any, len(names))
	for _, name := range names {
		ids, explicit := argSources[name]
		var srcs []any
		if !explicit {
			srcs = justVals
		} else {
			for _, id := range ids {
				e, ok := entries[id]
				if !ok {
					nodes, err := g.graph.Nodes([]string{id})
					if err != nil {
						return nil, nil, fmt.Errorf("argument %s: %v", name, err)
					}
					if e, _, err = g.entryValue(nodes[0]); err != nil {
						return nil, nil, err
					}
					entries[id] = e
				}
				srcs = append(srcs, e)
			}
		}
		if srcs == nil {
			srcs = []any{}
		}
		arguments[name] = map[string]any{"explicit": explicit, "sources": srcs}
	}
	// The trajectory as it will be once this call is appended.
	tc := g.catalog.TrajectoryCall(st.Tool, args)
	tcall := &tc
	if a, ok := arguments[tool.RecipientArg].(map[string]any); ok && tc.Role == trajectory.Send {
		for _, s := range a["sources"].([]any) {
			if tier := s.(map[string]any)["effective_tier"].(string); tier == "unverified" || tier == "external" {
				tcall.RecipientUntrusted = true
			}
		}
	}
	state, err := g.Trajectory(ctx, st.Session)
	if err != nil {
		return nil, nil, err
	}
	alerts := state.Observe(*tcall, g.model)
	approvals, err := g.approvals(st.Session, d.ArgsDigest, now)
	if err != nil {
		return nil, nil, err
	}
	in := map[string]any{
		"action": map[string]any{
			"tool": st.Tool, "args": args, "args_digest": d.ArgsDigest, "principal": st.Principal,
			"principal_tier": call.Tier.String(), "session": st.Session, "call_id": call.ID,
		},
		"tool":          toolValue(tool, known),
		"justification": justVals,
		"arguments":     arguments,
		"trajectory":    map[string]any{"features": state.FeatureMap(), "alerts": alertValues(alerts)},
		"approvals":     approvals,
	}
	return in, tcall, nil
}

// entryValue is one entry as the policy sees it, with the untrusted roots
// that set its labels and the paths to them.
func (g *Gate) entryValue(n *lineage.Node) (map[string]any, []lineage.Source, error) {
	var srcs []lineage.Source
	untrusted := []any{}
	for _, reach := range []bool{false, true} {
		s, err := g.graph.Witness(n, reach)
		if err != nil {
			return nil, nil, fmt.Errorf("entry %s: %v", n.ID, err)
		}
		if s == nil || (reach && len(srcs) > 0 && srcs[0].ID == s.ID) {
			continue
		}
		srcs = append(srcs, *s)
		path := make([]any, len(s.Path))
		for i, p := range s.Path {
			path[i] = p
		}
		untrusted = append(untrusted, map[string]any{
			"id": s.ID, "principal": s.Principal, "tier": s.Tier.String(), "path": path, "strong": s.Strong,
		})
	}
	return map[string]any{
		"id": n.ID, "principal": n.Principal, "kind": string(n.Kind), "tier": n.Tier.String(),
		"effective_tier": n.Effective.String(), "reach_tier": n.Reach.String(), "untrusted": untrusted,
	}, srcs, nil
}

func toolValue(t Tool, known bool) map[string]any {
	args := map[string]any{}
	for name, r := range t.Args {
		args[name] = map[string]any{"trusted": r.Trusted}
	}
	return map[string]any{
		"known": known, "sensitive": t.Sensitive, "irreversible": t.Irreversible,
		"external_sink": t.ExternalSink, "role": string(t.Role), "ask_on_untrusted": t.AskOnUntrusted, "args": args,
	}
}

func alertValues(alerts []trajectory.Alert) []any {
	out := make([]any, 0, len(alerts))
	for _, a := range alerts {
		out = append(out, map[string]any{"rule": a.Rule, "message": a.Message, "at": a.At})
	}
	return out
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
