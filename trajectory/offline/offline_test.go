package offline

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	. "github.com/pedigree-ai/pedigree/trajectory"
)

func run(roles ...Role) *State {
	s := &State{}
	for _, r := range roles {
		s.Append(Call{Tool: string(r), Role: r})
	}
	return s
}

func TestMetrics(t *testing.T) {
	m := metrics([]float64{0.9, 0.8, 0.3, 0.1}, []bool{true, true, false, false}, 0.5)
	if m.AUC != 1 || m.Recall != 1 || m.FPR != 0 {
		t.Fatalf("separable: %+v", m)
	}
	m = metrics([]float64{1, 1, 1, 1}, []bool{true, false, true, false}, 1)
	if m.AUC != 0.5 || m.Recall != 1 || m.FPR != 1 {
		t.Fatalf("all tied: %+v", m)
	}
	m = metrics([]float64{0.1, 0.9}, []bool{true, false}, 0.5)
	if m.AUC != 0 {
		t.Fatalf("inverted: %+v", m)
	}
}

// mapper stands in for the catalog (gate.Catalog.TrajectoryCall, which
// this package cannot import) on generated sessions: a send is known when
// it has arguments, and external unless every recipient is a colleague.
func mapper(tool string, args map[string]any) Call {
	roles := map[string]Role{"memory_recall": Recall, "memory_list": List, "memory_save": Save, "email_draft": Draft, "email_send": Send, "web_search": RAG}
	r, ok := roles[tool]
	if !ok {
		r = Other
	}
	c := Call{Tool: tool, Role: r}
	if to, ok := args["to"]; ok && r == Send {
		c.RecipientKnown = true
		rest := fmt.Sprint(to)
		for _, a := range colleagues {
			rest = strings.ReplaceAll(rest, a, "")
		}
		c.RecipientExternal = strings.Contains(rest, "@") || !strings.Contains(fmt.Sprint(to), "@")
	}
	return c
}

// shapeOf names the shape a generated send logged its recipients in.
func shapeOf(args map[string]any) string {
	switch to := args["to"].(type) {
	case nil:
		return "missing"
	case []any:
		return "list"
	case string:
		switch {
		case !strings.Contains(to, "@"):
			return "names"
		case strings.Contains(to, "<"):
			return "named"
		case strings.Contains(to, ";"):
			return "semicolon"
		case strings.Contains(to, ","):
			return "comma"
		}
		return "address"
	}
	return "other"
}

func TestGenerateShapes(t *testing.T) {
	seen := map[string]map[string]int{"attack": {}, "benign": {}}
	mixed := 0
	for _, s := range Generate(GenerateOptions{Sessions: 1000, Seed: 3}) {
		for _, c := range s.Calls {
			if c.Tool != "email_send" {
				continue
			}
			seen[s.Label][shapeOf(c.Args)]++
			if list, ok := c.Args["to"].([]any); ok && len(list) > 1 && slices.Contains(colleagues, list[1].(string)) && !slices.Contains(colleagues, list[0].(string)) {
				mixed++
			}
		}
	}
	for label, counts := range seen {
		for _, shape := range shapes {
			if counts[shape] == 0 {
				t.Errorf("%s sessions have no %s send (%v)", label, shape, counts)
			}
		}
		if counts["other"] != 0 {
			t.Errorf("%s: %d sends of no known shape", label, counts["other"])
		}
	}
	if mixed == 0 {
		t.Error("no list mixes internal and external recipients")
	}
}

func TestModelLearnsAndRoundTrips(t *testing.T) {
	train := Generate(GenerateOptions{Sessions: 600, Seed: 1})
	test := Generate(GenerateOptions{Sessions: 600, Seed: 2})
	m, err := TrainSessions(train, mapper, TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := EvaluateModel(m, test, mapper)
	if got.AUC < 0.8 {
		t.Fatalf("held-out AUC %.3f: the model learned nothing", got.AUC)
	}
	path := t.TempDir() + "/m.json"
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	back, err := LoadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	f := run(Recall, Recall, Send).Features()
	if back.Score(f) != m.Score(f) {
		t.Fatal("the saved model scores differently")
	}
	cv, err := CrossValidate(train, mapper, 5, 1, TrainOptions{})
	if err != nil || cv.AUC < 0.8 || cv.Sessions != 600 {
		t.Fatalf("cross-validation %+v %v", cv, err)
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	a := Generate(GenerateOptions{Sessions: 50, Seed: 7})
	b := Generate(GenerateOptions{Sessions: 50, Seed: 7})
	for i := range a {
		if a[i].ID != b[i].ID || len(a[i].Calls) != len(b[i].Calls) {
			t.Fatal("same seed, different sessions")
		}
	}
}
