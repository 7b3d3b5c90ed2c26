package lineage

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/pedigree-ai/pedigree/registry"
)

// PayloadType is the DSSE payload type of an entry. Verification pins it, so
// an envelope signed for another purpose cannot pose as an entry.
const PayloadType = "application/vnd.pedigree.entry.v1+json"

// Kind says what an entry is. It is informative for people and policies;
// trust never depends on it.
type Kind string

const (
	KindPrompt     Kind = "prompt"
	KindToolOutput Kind = "tool_output"
	KindMemory     Kind = "memory"
	KindSummary    Kind = "summary"
	KindRetrieval  Kind = "retrieval"
	KindCall       Kind = "call"
	KindApproval   Kind = "approval"
	// KindRejection is a person's signed "no" to a logged decision: it can
	// no longer be approved.
	KindRejection Kind = "rejection"
	// KindPlan is a plan the agent made before it acts: steps of a tool and
	// arguments, each a literal or a data slot (see PlanStep).
	KindPlan Kind = "plan"
)

// ParseKind checks a kind name.
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case KindPrompt, KindToolOutput, KindMemory, KindSummary, KindRetrieval, KindCall, KindApproval, KindRejection, KindPlan:
		return k, nil
	}
	return "", fmt.Errorf("%w: unknown kind %q (prompt, tool_output, memory, summary, retrieval, call, approval, rejection, plan)", ErrMalformed, s)
}

// Parent is a derivation edge named by the child, with the share of the
// child that the parent contributed. The signature covers both.
type Parent struct {
	ID     string  `json:"id"`
	Weight float64 `json:"weight"`
}

// Grant is what an approval entry approves: one exact action (tool and
// canonical arguments) in one session, before a deadline, once.
type Grant struct {
	Decision string `json:"decision"`
	Action   string `json:"action"`
	Expires  string `json:"expires"`
}

// Rejection is what a rejection entry rejects: one logged decision, bound
// to its exact action.
type Rejection struct {
	Decision string `json:"decision"`
	Action   string `json:"action"`
}

// PlanStep is one step of a plan: a tool and its arguments, in canonical
// JSON. Each argument is a literal, which a call citing the step must match
// exactly, or the data slot {"$data": true}, which a call may fill from
// data, judged by the value's own provenance, or a delegated slot
// ({"$data": {"step": N}} or {"$data": {"entry": ID}}, see Delegation): a
// data slot that names the source its value is to come from.
type PlanStep struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// PlanRef is the plan step a call cites. The plan must be one of the
// call's parents.
type PlanRef struct {
	ID   string `json:"id"`
	Step int    `json:"step"`
}

// DataSlot is the canonical form of a plan argument filled from data.
const DataSlot = `{"$data":true}`

// Statement is the signed content of an entry. Its JSON encoding, with the
// fields in this order and nothing else, is the canonical form that is signed
// and hashed into the ID; testdata/lineage/golden pins it.
type Statement struct {
	Version       int             `json:"version"`
	Principal     string          `json:"principal"`
	Kind          Kind            `json:"kind"`
	Session       string          `json:"session,omitempty"`
	ContentDigest string          `json:"content_digest"`
	Parents       []Parent        `json:"parents"`
	Context       *ContextRef     `json:"context,omitempty"`
	Tool          string          `json:"tool,omitempty"`
	Args          json.RawMessage `json:"args,omitempty"`
	Approval      *Grant          `json:"approval,omitempty"`
	Rejection     *Rejection      `json:"rejection,omitempty"`
	Steps         []PlanStep      `json:"steps,omitempty"`
	Plan          *PlanRef        `json:"plan,omitempty"`
	Time          string          `json:"time"`

	// expanded are every parent of a statement that names its context by
	// reference, set by the graph when it resolved the reference
	// (AllParents); never signed, never encoded.
	expanded []Parent
}

// ContextRef names, in a call's statement, the first N entries of its
// session's context as its first parents, each strong (weight 1), in order,
// before the parents it lists (none of which is among the N). Head is the
// context's hash chain after those N entries (c0 = 32 zero bytes, ck =
// sha256(ck-1 || idk), the chain the session's head row keeps), in hex: with
// the signature over it, it fixes the N entries as a list of them would. A
// statement that carries one is version 2; version 1 never does, so an
// older pedigree refuses such a call instead of reading it as a call that
// rests on nothing (docs/performance.md, issue 31).
type ContextRef struct {
	N    int    `json:"n"`
	Head string `json:"head"`
}

// ErrUnexpanded: a statement names its context by reference and was read
// without the graph resolving it, so its parents are not known.
var ErrUnexpanded = errors.New("a call that names its context by reference was not resolved against the graph")

// AllParents are every parent of the entry, in order: the first N entries
// of its session's context when it names them by reference, then the
// parents it lists. Whoever reads a call's parents reads them here, so that
// no reader sees only the listed ones. A statement with a reference that the
// graph has not resolved (Graph.Prepare, PrepareSigned, Expand) has no
// known parents: ErrUnexpanded.
func (s *Statement) AllParents() ([]Parent, error) {
	if s.Context == nil {
		return s.Parents, nil
	}
	if s.expanded == nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, ErrUnexpanded)
	}
	return s.expanded, nil
}

var (
	// ErrMalformed: the entry or envelope is not well formed.
	ErrMalformed = errors.New("malformed entry")
	// ErrUnknownEntry: no entry with that ID (or prefix) is stored.
	ErrUnknownEntry = errors.New("unknown entry")
	// ErrAmbiguous: an ID prefix matches more than one entry.
	ErrAmbiguous = errors.New("ambiguous entry ID prefix")
	// ErrUnknownParent: a parent named by an entry is not stored.
	ErrUnknownParent = errors.New("unknown parent")
)

// ValidSession reports whether s is a session a statement may name: empty,
// or up to MaxSessionLen of [A-Za-z0-9._:@/+-] starting with a letter or
// digit.
func ValidSession(s string) bool {
	return len(s) <= MaxSessionLen && (s == "" || sessionPat.MatchString(s))
}

var (
	sessionPat = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@/+-]*$`)
	toolPat    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)
)

// DigestContent returns the content digest an entry names.
func DigestContent(content []byte) string {
	s := sha256.Sum256(content)
	return "sha256:" + hex.EncodeToString(s[:])
}

// FormatTime renders the engine clock for a statement.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// CanonicalArgs returns the canonical form of a call's arguments: a JSON
// object, keys sorted, no insignificant space, numbers as written. Null or
// empty input is the empty object.
func CanonicalArgs(raw []byte) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("{}"), nil
	}
	if len(raw) > MaxArgsBytes {
		return nil, fmt.Errorf("%w: arguments larger than %d bytes", ErrMalformed, MaxArgsBytes)
	}
	// Decoding would rewrite what the tool may see: the last of two equal
	// keys wins, and invalid UTF-8 or a lone surrogate becomes U+FFFD. The
	// gate must decide on the arguments the tool gets, so both are refused.
	if !utf8.Valid(raw) {
		return nil, fmt.Errorf("%w: arguments are not valid UTF-8", ErrMalformed)
	}
	if err := loneSurrogate(raw); err != nil {
		return nil, err
	}
	if err := duplicateKeys(raw); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: arguments: %v", ErrMalformed, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: arguments: trailing data after the JSON object", ErrMalformed)
	}
	switch v.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case map[string]any:
	default:
		return nil, fmt.Errorf("%w: arguments must be a JSON object", ErrMalformed)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: arguments: %v", ErrMalformed, err)
	}
	return out, nil
}

// duplicateKeys refuses a JSON value with an object that names a key twice,
// at any depth. Malformed JSON is left to the decoder that follows.
func duplicateKeys(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	type frame struct {
		keys   map[string]bool
		object bool
		key    bool // the next token in this object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			k, _ := tok.(string)
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return nil
				}
				continue
			}
			if top.keys[k] {
				return fmt.Errorf("%w: arguments: the key %q appears twice in one object", ErrMalformed, k)
			}
			top.keys[k] = true
			top.key = false
			continue
		}
		if top != nil && top.object {
			top.key = true // after this value, a key
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, object: true, key: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].key = true
			}
		}
		if len(stack) == 0 {
			return nil
		}
	}
}

// loneSurrogate refuses a \u escape of half a UTF-16 surrogate pair, which
// decoding would turn into U+FFFD.
func loneSurrogate(raw []byte) error {
	bad := fmt.Errorf("%w: arguments: a \\u escape names half a surrogate pair", ErrMalformed)
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		return rune(v), err == nil
	}
	in := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			in = !in
		case in && c == '\\':
			r, ok := hex4(i)
			if !ok {
				i++ // an escape of one character
				continue
			}
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return bad
			case r >= 0xD800 && r <= 0xDBFF:
				lo, ok := hex4(i + 6)
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return bad
				}
				i += 11
			default:
				i += 5
			}
		}
	}
	return nil
}

// ActionDigest binds a tool and its canonical arguments: what an approval
// approves and what the decision log records.
func ActionDigest(tool string, canonicalArgs []byte) string {
	h := sha256.New()
	h.Write([]byte("pedigree-action-v1\x00"))
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(canonicalArgs)
	return hex.EncodeToString(h.Sum(nil))
}

// Encode returns the canonical bytes of s.
func (s *Statement) Encode() ([]byte, error) {
	if s.Parents == nil {
		s.Parents = []Parent{}
	}
	return json.Marshal(s)
}

// Validate checks every field of s for shape and range.
func (s *Statement) Validate() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("%w: "+f, append([]any{ErrMalformed}, a...)...) }
	switch {
	case s.Version == 1 && s.Context == nil:
	case s.Version == 2 && s.Context != nil:
		if err := s.validateRef(); err != nil {
			return err
		}
	default:
		return bad("version %d: want 1, or 2 with a context reference, and a context reference only with version 2", s.Version)
	}
	if err := registry.ValidateID(s.Principal); err != nil {
		return err
	}
	if _, err := ParseKind(string(s.Kind)); err != nil {
		return err
	}
	if !ValidSession(s.Session) {
		return bad("session %q: up to %d of [A-Za-z0-9._:@/+-], starting with a letter or digit", s.Session, MaxSessionLen)
	}
	if len(s.ContentDigest) != 71 || s.ContentDigest[:7] != "sha256:" || !IsID(s.ContentDigest[7:]) {
		return bad("content digest %q: want sha256:<64 hex>", s.ContentDigest)
	}
	if len(s.Parents) > MaxParents {
		return bad("%d parents, at most %d", len(s.Parents), MaxParents)
	}
	seen := make(map[string]struct{}, len(s.Parents))
	for _, p := range s.Parents {
		if !IsID(p.ID) {
			return bad("parent ID %q: want 64 lowercase hex", p.ID)
		}
		if math.IsNaN(p.Weight) || p.Weight < 0 || p.Weight > 1 {
			return bad("parent %s: weight %v outside [0, 1]", p.ID[:12], p.Weight)
		}
		if _, dup := seen[p.ID]; dup {
			return bad("parent %s named twice", p.ID[:12])
		}
		seen[p.ID] = struct{}{}
	}
	if s.Kind == KindCall {
		if s.Tool == "" || len(s.Tool) > MaxToolLen || !toolPat.MatchString(s.Tool) {
			return bad("call tool %q: up to %d of [A-Za-z0-9._:-]", s.Tool, MaxToolLen)
		}
		c, err := CanonicalArgs(s.Args)
		if err != nil {
			return err
		}
		if !bytes.Equal(c, s.Args) {
			return bad("call arguments are not in canonical form")
		}
	} else if s.Tool != "" || s.Args != nil {
		return bad("only a call names a tool and arguments")
	}
	if (s.Kind == KindApproval) != (s.Approval != nil) {
		return bad("an approval entry, and only one, carries an approval grant")
	}
	if g := s.Approval; g != nil {
		if !IsID(g.Decision) || !IsID(g.Action) {
			return bad("approval must name a decision ID and an action digest")
		}
		if _, err := time.Parse(time.RFC3339Nano, g.Expires); err != nil {
			return bad("approval expiry %q: %v", g.Expires, err)
		}
	}
	if err := s.validatePlan(); err != nil {
		return err
	}
	if _, err := time.Parse(time.RFC3339Nano, s.Time); err != nil {
		return bad("time %q: %v", s.Time, err)
	}
	return nil
}

// validateRef checks a version 2 statement's context reference: only a
// call names one, in a session, of 1 to MaxContextRef entries, with a full
// chain head, and it cites no plan step (a plan citation names its plan
// among the listed parents, which a reference leaves to the context).
func (s *Statement) validateRef() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("%w: "+f, append([]any{ErrMalformed}, a...)...) }
	c := s.Context
	switch {
	case s.Kind != KindCall:
		return bad("only a call names its context by reference, not a %s", s.Kind)
	case s.Session == "":
		return bad("a context reference needs the call's session")
	case c.N < 1 || c.N > MaxContextRef:
		return bad("a context reference names 1 to %d entries, not %d", MaxContextRef, c.N)
	case !IsID(c.Head):
		return bad("context reference head %q: want 64 lowercase hex", c.Head)
	case s.Plan != nil:
		return bad("a call that cites a plan step lists its parents: it names no context by reference")
	}
	return nil
}

// validatePlan checks the fields of rejections and plans, and a call's
// citation of a plan step.
func (s *Statement) validatePlan() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("%w: "+f, append([]any{ErrMalformed}, a...)...) }
	if (s.Kind == KindRejection) != (s.Rejection != nil) {
		return bad("a rejection entry, and only one, carries a rejection")
	}
	if r := s.Rejection; r != nil && (!IsID(r.Decision) || !IsID(r.Action)) {
		return bad("a rejection must name a decision ID and an action digest")
	}
	if (s.Kind == KindPlan) != (s.Steps != nil) {
		return bad("a plan entry, and only one, carries steps")
	}
	if s.Kind == KindPlan {
		if len(s.Steps) == 0 || len(s.Steps) > MaxPlanSteps {
			return bad("a plan has %d steps, want 1 to %d", len(s.Steps), MaxPlanSteps)
		}
		if len(s.Parents) == 0 {
			return bad("a plan names its parents explicitly: what it was made from")
		}
		for i, st := range s.Steps {
			if err := st.validate(); err != nil {
				return fmt.Errorf("plan step %d: %w", i, err)
			}
		}
		if err := checkDelegations(s.Steps); err != nil {
			return err
		}
	}
	if p := s.Plan; p != nil {
		if s.Kind != KindCall {
			return bad("only a call cites a plan step")
		}
		if !IsID(p.ID) || p.Step < 0 || p.Step >= MaxPlanSteps {
			return bad("a plan citation needs a plan ID and a step number below %d", MaxPlanSteps)
		}
		if !slices.ContainsFunc(s.Parents, func(q Parent) bool { return q.ID == p.ID }) {
			return bad("a call that cites plan %s must name it as a parent", p.ID[:12])
		}
	}
	return nil
}

func (st PlanStep) validate() error {
	if st.Tool == "" || len(st.Tool) > MaxToolLen || !toolPat.MatchString(st.Tool) {
		return fmt.Errorf("%w: tool %q: up to %d of [A-Za-z0-9._:-]", ErrMalformed, st.Tool, MaxToolLen)
	}
	c, err := CanonicalArgs(st.Args)
	if err != nil {
		return err
	}
	if !bytes.Equal(c, st.Args) {
		return fmt.Errorf("%w: arguments are not in canonical form", ErrMalformed)
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(st.Args, &args); err != nil {
		return fmt.Errorf("%w: arguments: %v", ErrMalformed, err)
	}
	for name, v := range args {
		if string(v) == DataSlot {
			continue
		}
		if _, ok, err := delegation(v); ok || err != nil {
			if err != nil {
				return fmt.Errorf("%w: argument %s: %v", ErrMalformed, name, err)
			}
			continue
		}
		if err := noDataKey(v); err != nil {
			return fmt.Errorf("%w: argument %s: %v", ErrMalformed, name, err)
		}
	}
	return nil
}

// noDataKey refuses "$data" anywhere in a literal: a data slot is exactly
// {"$data": true} or a delegated slot, as a whole argument, so nothing can
// look like one.
func noDataKey(raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	var walk func(any) error
	walk = func(v any) error {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "$data" {
					return errors.New(`"$data" may only be a whole argument, exactly {"$data": true}`)
				}
				if err := walk(e); err != nil {
					return err
				}
			}
		case []any:
			for _, e := range x {
				if err := walk(e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(v)
}

// PlanSteps canonicalises a plan's steps as a person or a harness writes
// them ([{"tool": …, "args": {…}}]), strictly.
func PlanSteps(raw []byte) ([]PlanStep, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var steps []struct {
		Tool string          `json:"tool"`
		Args json.RawMessage `json:"args"`
	}
	if err := dec.Decode(&steps); err != nil {
		return nil, fmt.Errorf("%w: plan steps: %v", ErrMalformed, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: plan steps: trailing data", ErrMalformed)
	}
	if len(steps) == 0 || len(steps) > MaxPlanSteps {
		return nil, fmt.Errorf("%w: a plan has %d steps, want 1 to %d", ErrMalformed, len(steps), MaxPlanSteps)
	}
	out := make([]PlanStep, len(steps))
	for i, st := range steps {
		args, err := CanonicalArgs(st.Args)
		if err != nil {
			return nil, fmt.Errorf("plan step %d: %w", i, err)
		}
		out[i] = PlanStep{Tool: st.Tool, Args: args}
		if err := out[i].validate(); err != nil {
			return nil, fmt.Errorf("plan step %d: %w", i, err)
		}
	}
	if err := checkDelegations(out); err != nil {
		return nil, err
	}
	return out, nil
}

// ParseStatement decodes and validates a payload, and refuses any encoding
// other than the canonical one: two byte strings never mean the same entry.
func ParseStatement(payload []byte) (*Statement, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	var s Statement
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the statement", ErrMalformed)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	again, err := s.Encode()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if !bytes.Equal(again, payload) {
		return nil, fmt.Errorf("%w: statement is not in canonical form", ErrMalformed)
	}
	return &s, nil
}

// pae is DSSE's pre-authentication encoding: the bytes a DSSE signature
// covers (DSSE protocol, "Signature definition").
func pae(payloadType string, payload []byte) []byte {
	var b bytes.Buffer
	b.WriteString("DSSEv1 ")
	b.WriteString(strconv.Itoa(len(payloadType)))
	b.WriteByte(' ')
	b.WriteString(payloadType)
	b.WriteByte(' ')
	b.WriteString(strconv.Itoa(len(payload)))
	b.WriteByte(' ')
	b.Write(payload)
	return b.Bytes()
}

// IDOf is an entry's ID: the hex sha256 of the bytes its signature covers.
// Since a parent's ID is inside those bytes, rewriting any ancestor changes
// every descendant's ID.
func IDOf(payload []byte) string {
	s := sha256.Sum256(pae(PayloadType, payload))
	return hex.EncodeToString(s[:])
}

// Sign encodes s canonically, signs it as a DSSE envelope and returns the
// envelope and the entry's ID.
func Sign(signer *registry.Signer, s *Statement) (env []byte, id string, err error) {
	signed, err := SignStatement(signer, s)
	if err != nil {
		return nil, "", err
	}
	return signed.env, signed.id, nil
}

// Signed is an envelope this process has just signed with an in-process
// key, kept with the statement it was made from. The graph stores it
// without decoding the envelope again or re-verifying a signature it has
// just made (see Graph.PrepareSigned). Its fields cannot be changed after
// signing.
type Signed struct {
	st      *Statement
	payload []byte
	env     []byte
	id      string
	key     registry.PublicKey
}

// SignStatement validates s, signs it with signer and keeps a private copy
// of the statement, so that changing s afterwards cannot change what is
// stored.
func SignStatement(signer *registry.Signer, s *Statement) (*Signed, error) {
	if s == nil || signer == nil {
		return nil, fmt.Errorf("%w: nothing to sign, or no key to sign it with", ErrMalformed)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	payload, err := s.Encode()
	if err != nil {
		return nil, err
	}
	env, err := signer.SignEnvelope(PayloadType, payload)
	if err != nil {
		return nil, err
	}
	return &Signed{st: cloneStatement(s), payload: payload, env: env, id: IDOf(payload), key: signer.Public()}, nil
}

func cloneStatement(s *Statement) *Statement {
	c := *s
	c.Parents = slices.Clone(s.Parents)
	c.Args = slices.Clone(s.Args)
	if s.Context != nil {
		r := *s.Context
		c.Context = &r
	}
	if s.Approval != nil {
		g := *s.Approval
		c.Approval = &g
	}
	if s.Rejection != nil {
		r := *s.Rejection
		c.Rejection = &r
	}
	if s.Steps != nil {
		c.Steps = make([]PlanStep, len(s.Steps))
		for i, st := range s.Steps {
			c.Steps[i] = PlanStep{Tool: st.Tool, Args: slices.Clone(st.Args)}
		}
	}
	if s.Plan != nil {
		p := *s.Plan
		c.Plan = &p
	}
	return &c
}

// Envelope is the signed DSSE envelope's JSON.
func (s *Signed) Envelope() []byte { return s.env }

// ID is the entry's ID.
func (s *Signed) ID() string { return s.id }

// Statement returns a copy of the signed statement (nil for a Signed that
// SignStatement did not make).
func (s *Signed) Statement() *Statement {
	if s == nil || s.st == nil {
		return nil
	}
	return cloneStatement(s.st)
}

// envelope is the DSSE envelope as stored; decoding it strictly keeps
// smuggled fields out of the store.
type envelope struct {
	PayloadType string `json:"payloadType"`
	Payload     string `json:"payload"`
	Signatures  []struct {
		KeyID string `json:"keyid"`
		Sig   string `json:"sig"`
	} `json:"signatures"`
}

// Open decodes an envelope without checking its signature: the statement,
// the payload, and the ID. Insert and Verify check the signature.
func Open(env []byte) (*Statement, []byte, string, error) {
	if len(env) > MaxEnvelopeBytes {
		return nil, nil, "", fmt.Errorf("%w: envelope larger than %d bytes", ErrMalformed, MaxEnvelopeBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(env))
	dec.DisallowUnknownFields()
	var e envelope
	if err := dec.Decode(&e); err != nil {
		return nil, nil, "", fmt.Errorf("%w: envelope: %v", ErrMalformed, err)
	}
	if dec.More() {
		return nil, nil, "", fmt.Errorf("%w: trailing data after the envelope", ErrMalformed)
	}
	if e.PayloadType != PayloadType {
		return nil, nil, "", fmt.Errorf("%w: payload type %q, want %q", ErrMalformed, e.PayloadType, PayloadType)
	}
	if len(e.Signatures) != 1 {
		return nil, nil, "", fmt.Errorf("%w: %d signatures, want exactly one", ErrMalformed, len(e.Signatures))
	}
	payload, err := base64.StdEncoding.Strict().DecodeString(e.Payload)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	s, err := ParseStatement(payload)
	if err != nil {
		return nil, nil, "", err
	}
	return s, payload, IDOf(payload), nil
}
