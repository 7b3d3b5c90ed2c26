package lineage_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

var update = flag.Bool("update", false, "rewrite golden files")

func goldenStatement() *lineage.Statement {
	return &lineage.Statement{
		Version: 1, Principal: "agent:planner", Kind: lineage.KindCall, Session: "s-1",
		ContentDigest: lineage.DigestContent([]byte("content")),
		Parents:       []lineage.Parent{{ID: strings.Repeat("ab", 32), Weight: 0.8}, {ID: strings.Repeat("cd", 32), Weight: 0.1}},
		Tool:          "send_money", Args: []byte(`{"amount":500,"to":"123-456"}`),
		Time: "2026-11-29T12:00:00Z",
	}
}

// goldenStatementV2 is the golden call naming the first 12 entries of its
// session's context by reference, then listing one parent.
func goldenStatementV2() *lineage.Statement {
	st := goldenStatement()
	st.Version, st.Parents = 2, st.Parents[1:]
	st.Context = &lineage.ContextRef{N: 12, Head: strings.Repeat("ef", 32)}
	return st
}

// TestVersion1RefusesVersion2 holds the golden version 2 envelope to the
// rules of version 1's decoder (before context references: the fields
// below, nothing else, and version 1): it is refused as malformed, never
// read as a call with only its listed parents. Today's decoder reads it
// with its reference.
func TestVersion1RefusesVersion2(t *testing.T) {
	env, err := os.ReadFile(filepath.Join("..", "testdata", "lineage", "golden", "envelope-v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, payload, _, err := lineage.Open(env)
	if err != nil || st.Version != 2 || st.Context == nil || st.Context.N != 12 {
		t.Fatalf("today's decoder: %+v, %v", st, err)
	}
	type v1Statement struct {
		Version       int                `json:"version"`
		Principal     string             `json:"principal"`
		Kind          string             `json:"kind"`
		Session       string             `json:"session,omitempty"`
		ContentDigest string             `json:"content_digest"`
		Parents       []lineage.Parent   `json:"parents"`
		Tool          string             `json:"tool,omitempty"`
		Args          json.RawMessage    `json:"args,omitempty"`
		Approval      *lineage.Grant     `json:"approval,omitempty"`
		Rejection     *lineage.Rejection `json:"rejection,omitempty"`
		Steps         []lineage.PlanStep `json:"steps,omitempty"`
		Plan          *lineage.PlanRef   `json:"plan,omitempty"`
		Time          string             `json:"time"`
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	var old v1Statement
	if err := dec.Decode(&old); err == nil {
		t.Fatalf("version 1's decoder read a version 2 statement: %+v", old)
	}
	// Without the field, the version alone refuses it.
	strip := strings.Replace(string(payload), `,"context":{"n":12,"head":"`+strings.Repeat("ef", 32)+`"}`, "", 1)
	if strip == string(payload) {
		t.Fatal("the golden payload has no context field")
	}
	if _, err := lineage.ParseStatement([]byte(strip)); !errors.Is(err, lineage.ErrMalformed) {
		t.Fatalf("a version 2 statement without its reference: %v", err)
	}
	if err := json.Unmarshal([]byte(strip), &old); err != nil || old.Version == 1 {
		t.Fatalf("version %d, %v", old.Version, err)
	}
}

// TestCanonicalGolden pins the signed bytes, the ID and (Ed25519 being
// deterministic) the envelope of a fixed statement under a fixed key. A
// change here changes every entry ID: regenerate with -update only on
// purpose, and say so in the changelog.
func TestCanonicalGolden(t *testing.T) {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	signer, err := registry.NewSigner(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for suffix, st := range map[string]*lineage.Statement{"": goldenStatement(), "-v2": goldenStatementV2()} {
		payload, err := st.Encode()
		if err != nil {
			t.Fatal(err)
		}
		env, id, err := lineage.Sign(signer, st)
		if err != nil {
			t.Fatal(err)
		}
		got["statement"+suffix+".json"], got["id"+suffix+".txt"], got["envelope"+suffix+".json"] = payload, []byte(id+"\n"), env
	}
	for name, b := range got {
		path := filepath.Join("..", "testdata", "lineage", "golden", name)
		if *update {
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./lineage -update once)", err)
		}
		if string(want) != string(b) {
			t.Errorf("%s changed:\n got %s\nwant %s", name, b, want)
		}
	}
}

func TestCanonicalArgs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{``, `{}`}, {`null`, `{}`}, {` {"b":1, "a":[2, {"d":1,"c":2}]} `, `{"a":[2,{"c":2,"d":1}],"b":1}`},
		{`{"n":1.50}`, `{"n":1.50}`},
	} {
		got, err := lineage.CanonicalArgs([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("CanonicalArgs(%q) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{`[1]`, `"s"`, `{"a":1} {"b":2}`, `{"a":`, `3`} {
		if _, err := lineage.CanonicalArgs([]byte(bad)); err == nil {
			t.Errorf("CanonicalArgs(%q) accepted", bad)
		}
	}
}

func TestParseStatementRefusesNonCanonical(t *testing.T) {
	payload, _ := goldenStatement().Encode()
	if _, err := lineage.ParseStatement(payload); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]string{
		"spaces":        strings.Replace(string(payload), `"version":1`, `"version": 1`, 1),
		"unknown field": strings.Replace(string(payload), `{"version":1`, `{"extra":1,"version":1`, 1),
		"reordered":     strings.Replace(string(payload), `{"version":1,"principal":"agent:planner"`, `{"principal":"agent:planner","version":1`, 1),
		"trailing":      string(payload) + "{}",
	} {
		if _, err := lineage.ParseStatement([]byte(p)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzOpen(f *testing.F) {
	for _, name := range []string{"envelope.json", "statement.json"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "lineage", "golden", name))
		if err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"payloadType":"x","payload":"","signatures":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, payload, id, err := lineage.Open(b)
		if err != nil {
			return
		}
		// Whatever decodes must be canonical and valid, and hash to its ID.
		again, err := st.Encode()
		if err != nil || string(again) != string(payload) || lineage.IDOf(payload) != id || st.Validate() != nil {
			t.Fatalf("decoded a non-canonical or invalid statement: %s", payload)
		}
	})
}

func TestSignNothing(t *testing.T) {
	s, _, err := registry.GenerateSigner(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lineage.SignStatement(s, nil); !errors.Is(err, lineage.ErrMalformed) {
		t.Fatalf("signing a nil statement: %v", err)
	}
	if _, err := lineage.SignStatement(nil, &lineage.Statement{}); !errors.Is(err, lineage.ErrMalformed) {
		t.Fatalf("signing with a nil key: %v", err)
	}
}

// Each limit on a statement admits a value at the limit and refuses one
// past it.
func TestStatementLimits(t *testing.T) {
	id := func(i int) string { return fmt.Sprintf("%064x", i) }
	parents := func(n int) []lineage.Parent {
		out := make([]lineage.Parent, n)
		for i := range out {
			out[i] = lineage.Parent{ID: id(i), Weight: 1}
		}
		return out
	}
	call := func(tool string) func(*lineage.Statement) {
		return func(s *lineage.Statement) { s.Tool = tool }
	}
	step := func(tool string) func(*lineage.Statement) {
		return func(s *lineage.Statement) {
			s.Kind, s.Tool, s.Args = lineage.KindPlan, "", nil
			s.Steps = []lineage.PlanStep{{Tool: tool, Args: []byte(`{}`)}}
		}
	}
	steps := func(n int) func(*lineage.Statement) {
		return func(s *lineage.Statement) {
			s.Kind, s.Tool, s.Args = lineage.KindPlan, "", nil
			s.Steps = slices.Repeat([]lineage.PlanStep{{Tool: "t", Args: []byte(`{}`)}}, n)
		}
	}
	args := func(n int) func(*lineage.Statement) {
		// {"a":"xxx…"} is n bytes.
		return func(s *lineage.Statement) { s.Args = []byte(`{"a":"` + strings.Repeat("x", n-8) + `"}`) }
	}
	for _, c := range []struct {
		name     string
		at, past func(*lineage.Statement)
	}{
		{"session length",
			func(s *lineage.Statement) { s.Session = strings.Repeat("s", lineage.MaxSessionLen) },
			func(s *lineage.Statement) { s.Session = strings.Repeat("s", lineage.MaxSessionLen+1) }},
		{"parents", func(s *lineage.Statement) { s.Parents = parents(lineage.MaxParents) },
			func(s *lineage.Statement) { s.Parents = parents(lineage.MaxParents + 1) }},
		{"call tool length", call(strings.Repeat("t", lineage.MaxToolLen)), call(strings.Repeat("t", lineage.MaxToolLen+1))},
		{"plan step tool length", step(strings.Repeat("t", lineage.MaxToolLen)), step(strings.Repeat("t", lineage.MaxToolLen+1))},
		{"plan steps", steps(lineage.MaxPlanSteps), steps(lineage.MaxPlanSteps + 1)},
		{"arguments", args(lineage.MaxArgsBytes), args(lineage.MaxArgsBytes + 1)},
		{"weight", func(s *lineage.Statement) {
			s.Parents = []lineage.Parent{{ID: id(1), Weight: 1}, {ID: id(2), Weight: 0}}
		},
			func(s *lineage.Statement) { s.Parents = []lineage.Parent{{ID: id(1), Weight: math.Nextafter(1, 2)}} }},
		{"plan citation first step",
			func(s *lineage.Statement) { s.Plan = &lineage.PlanRef{ID: id(0), Step: 0} },
			func(s *lineage.Statement) { s.Plan = &lineage.PlanRef{ID: id(0), Step: -1} }},
		{"plan citation step",
			func(s *lineage.Statement) { s.Plan = &lineage.PlanRef{ID: id(0), Step: lineage.MaxPlanSteps - 1} },
			func(s *lineage.Statement) { s.Plan = &lineage.PlanRef{ID: id(0), Step: lineage.MaxPlanSteps} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := goldenStatement()
			st.Parents = []lineage.Parent{{ID: id(0), Weight: 1}}
			c.at(st)
			if err := st.Validate(); err != nil {
				t.Fatalf("at the limit: %v", err)
			}
			st = goldenStatement()
			st.Parents = []lineage.Parent{{ID: id(0), Weight: 1}}
			c.past(st)
			if err := st.Validate(); !errors.Is(err, lineage.ErrMalformed) {
				t.Fatalf("past the limit: %v, want ErrMalformed", err)
			}
		})
	}
}

// What SignStatement signed cannot be changed through the statement it was
// given, nor through a copy it hands back: every field that shares memory
// (parents, arguments, grant, rejection, steps, plan citation) is copied.
func TestSignedStatementIsPrivate(t *testing.T) {
	s, _, err := registry.GenerateSigner(nil)
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Repeat("ef", 32)
	base := func() *lineage.Statement {
		st := goldenStatement()
		st.Principal = "user:alice"
		return st
	}
	call := base()
	call.Parents = append(call.Parents, lineage.Parent{ID: plan, Weight: 1})
	call.Plan = &lineage.PlanRef{ID: plan, Step: 0}
	approval := base()
	approval.Kind, approval.Tool, approval.Args = lineage.KindApproval, "", nil
	approval.Approval = &lineage.Grant{Decision: strings.Repeat("01", 32), Action: strings.Repeat("02", 32), Expires: "2026-11-30T12:00:00Z"}
	rejection := base()
	rejection.Kind, rejection.Tool, rejection.Args = lineage.KindRejection, "", nil
	rejection.Rejection = &lineage.Rejection{Decision: strings.Repeat("01", 32), Action: strings.Repeat("02", 32)}
	planSt := base()
	planSt.Kind, planSt.Tool, planSt.Args = lineage.KindPlan, "", nil
	planSt.Steps = []lineage.PlanStep{{Tool: "email_send", Args: []byte(`{"to":"bob"}`)}}
	scribble := func(st *lineage.Statement) {
		st.Parents[0].Weight = 0.01
		if st.Args != nil {
			st.Args[2] = 'X'
		}
		if st.Approval != nil {
			st.Approval.Decision = plan
		}
		if st.Rejection != nil {
			st.Rejection.Action = plan
		}
		if st.Steps != nil {
			st.Steps[0].Tool = "bank_transfer"
			st.Steps[0].Args[2] = 'X'
		}
		if st.Plan != nil {
			st.Plan.Step = 7
		}
	}
	for name, st := range map[string]*lineage.Statement{"call": call, "approval": approval, "rejection": rejection, "plan": planSt, "memory": func() *lineage.Statement {
		m := base()
		m.Kind, m.Tool, m.Args = lineage.KindMemory, "", nil
		return m
	}()} {
		t.Run(name, func(t *testing.T) {
			want, err := st.Encode()
			if err != nil {
				t.Fatal(err)
			}
			signed, err := lineage.SignStatement(s, st)
			if err != nil {
				t.Fatal(err)
			}
			scribble(st)
			scribble(signed.Statement())
			got, err := signed.Statement().Encode()
			if err != nil || string(got) != string(want) {
				t.Fatalf("signed statement changed:\n got %s\nwant %s", got, want)
			}
			if err := signed.Statement().Validate(); err != nil {
				t.Fatalf("the signed statement no longer validates: %v", err)
			}
			if lineage.IDOf(got) != signed.ID() {
				t.Fatal("the signed statement does not hash to the signed ID")
			}
		})
	}
	if (&lineage.Signed{}).Statement() != nil {
		t.Fatal("a Signed that SignStatement did not make has a statement")
	}
}

// The envelope limit is on its bytes: an envelope padded with JSON space to
// exactly MaxEnvelopeBytes opens, one byte more does not.
func TestEnvelopeLimit(t *testing.T) {
	s, _, err := registry.GenerateSigner(nil)
	if err != nil {
		t.Fatal(err)
	}
	st := goldenStatement()
	env, id, err := lineage.Sign(s, st)
	if err != nil {
		t.Fatal(err)
	}
	pad := func(n int) []byte { return append(slices.Clone(env), strings.Repeat(" ", n-len(env))...) }
	if _, _, got, err := lineage.Open(pad(lineage.MaxEnvelopeBytes)); err != nil || got != id {
		t.Fatalf("at the limit: %s %v", got, err)
	}
	if _, _, _, err := lineage.Open(pad(lineage.MaxEnvelopeBytes + 1)); !errors.Is(err, lineage.ErrMalformed) {
		t.Fatalf("past the limit: %v, want ErrMalformed", err)
	}
}
