package offline

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"

	"github.com/pedigree-ai/pedigree/trajectory"
)

// Session is a labelled session, as `trajectory train` and `eval` read it
// (one JSON object a line; other fields are ignored).
type Session struct {
	ID    string        `json:"id"`
	Label string        `json:"label"`
	Calls []SessionCall `json:"calls"`
}

// SessionCall is one call of a labelled session.
type SessionCall struct {
	Tool string         `json:"tool"`
	Args map[string]any `json:"args,omitempty"`
}

// Mapper turns a tool and its arguments into a trajectory call (its role,
// and what is known of a send's recipient), from the tool catalog.
type Mapper func(tool string, args map[string]any) trajectory.Call

// StructureOnly is m with every call's arguments left out: what the
// detector sees when a harness logs tool names alone.
func StructureOnly(m Mapper) Mapper {
	return func(tool string, _ map[string]any) trajectory.Call { return m(tool, nil) }
}

// HasArguments reports whether any call of the sessions carries arguments.
func HasArguments(sessions []Session) bool {
	for _, s := range sessions {
		for _, c := range s.Calls {
			if len(c.Args) > 0 {
				return true
			}
		}
	}
	return false
}

// ReadSessions reads labelled sessions.
func ReadSessions(r io.Reader) ([]Session, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	var out []Session
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var s Session
		if err := json.Unmarshal(line, &s); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if s.Label != "attack" && s.Label != "benign" {
			return nil, fmt.Errorf("line %d: label %q, want attack or benign", n, s.Label)
		}
		for i, c := range s.Calls {
			if c.Tool == "" {
				return nil, fmt.Errorf("line %d: call %d has no tool", n, i+1)
			}
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// Replay runs a session through a fresh state: its final state and whether
// the invariant rules alerted on any call.
func Replay(s Session, m Mapper) (*trajectory.State, int) {
	st := &trajectory.State{}
	alerts := 0
	for _, c := range s.Calls {
		alerts += len(st.Observe(m(c.Tool, c.Args), nil))
	}
	return st, alerts
}

// Metrics are a detector's figures on labelled sessions.
type Metrics struct {
	Sessions  int     `json:"sessions"`
	Attack    int     `json:"attack"`
	Benign    int     `json:"benign"`
	AUC       float64 `json:"auc"`
	Recall    float64 `json:"alert_rate_attack"`
	FPR       float64 `json:"alert_rate_benign"`
	Threshold float64 `json:"threshold"`
}

// EvaluateRules scores each session by the number of rule alerts it raised;
// a session is alerted when it raised at least one.
func EvaluateRules(sessions []Session, m Mapper) Metrics {
	scores := make([]float64, len(sessions))
	labels := make([]bool, len(sessions))
	for i, s := range sessions {
		_, n := Replay(s, m)
		scores[i], labels[i] = float64(n), s.Label == "attack"
	}
	return metrics(scores, labels, 1)
}

// EvaluateModel scores each session by the model's highest score over its
// prefixes (the gate scores every call as it comes).
func EvaluateModel(model *trajectory.Model, sessions []Session, m Mapper) Metrics {
	scores := make([]float64, len(sessions))
	labels := make([]bool, len(sessions))
	for i, s := range sessions {
		scores[i], labels[i] = maxScore(model, s, m), s.Label == "attack"
	}
	return metrics(scores, labels, model.Threshold)
}

func maxScore(model *trajectory.Model, s Session, m Mapper) float64 {
	st := &trajectory.State{}
	best := 0.0
	for _, c := range s.Calls {
		st.Append(m(c.Tool, c.Args))
		best = max(best, model.Score(st.Features()))
	}
	return best
}

// TrainSessions trains a model on the sessions' final features.
func TrainSessions(sessions []Session, m Mapper, o trajectory.TrainOptions) (*trajectory.Model, error) {
	x := make([][]float64, len(sessions))
	y := make([]bool, len(sessions))
	for i, s := range sessions {
		st := &trajectory.State{}
		for _, c := range s.Calls {
			st.Append(m(c.Tool, c.Args))
		}
		x[i], y[i] = st.Features(), s.Label == "attack"
	}
	return trajectory.Train(x, y, o)
}

// CrossValidate trains on k-1 folds and evaluates on the held-out fold, k
// times; the figures are the means over folds. The folds are a seeded
// shuffle, so a run is repeatable.
func CrossValidate(sessions []Session, m Mapper, k int, seed uint64, o trajectory.TrainOptions) (Metrics, error) {
	if k < 2 || k > len(sessions) {
		return Metrics{}, fmt.Errorf("trajectory: %d folds for %d sessions", k, len(sessions))
	}
	idx := make([]int, len(sessions))
	for i := range idx {
		idx[i] = i
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	r.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
	var sum Metrics
	for f := range k {
		var train, test []Session
		for i, j := range idx {
			if i%k == f {
				test = append(test, sessions[j])
			} else {
				train = append(train, sessions[j])
			}
		}
		model, err := TrainSessions(train, m, o)
		if err != nil {
			return Metrics{}, fmt.Errorf("fold %d: %w", f+1, err)
		}
		got := EvaluateModel(model, test, m)
		sum.AUC += got.AUC / float64(k)
		sum.Recall += got.Recall / float64(k)
		sum.FPR += got.FPR / float64(k)
		sum.Threshold = got.Threshold
	}
	all := metrics(make([]float64, len(sessions)), labelsOf(sessions), 1)
	sum.Sessions, sum.Attack, sum.Benign = all.Sessions, all.Attack, all.Benign
	return sum, nil
}

func labelsOf(ss []Session) []bool {
	out := make([]bool, len(ss))
	for i, s := range ss {
		out[i] = s.Label == "attack"
	}
	return out
}

// metrics computes AUC (the Mann-Whitney statistic, ties counted half) and
// the alert rates at threshold.
func metrics(scores []float64, labels []bool, threshold float64) Metrics {
	m := Metrics{Sessions: len(scores), Threshold: threshold}
	type sl struct {
		s float64
		a bool
	}
	xs := make([]sl, len(scores))
	for i := range scores {
		xs[i] = sl{scores[i], labels[i]}
		if labels[i] {
			m.Attack++
			if scores[i] >= threshold {
				m.Recall++
			}
		} else {
			m.Benign++
			if scores[i] >= threshold {
				m.FPR++
			}
		}
	}
	if m.Attack > 0 {
		m.Recall /= float64(m.Attack)
	}
	if m.Benign > 0 {
		m.FPR /= float64(m.Benign)
	}
	if m.Attack == 0 || m.Benign == 0 {
		return m
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].s < xs[j].s })
	// Rank-sum with average ranks for ties.
	var rankSum float64
	for i := 0; i < len(xs); {
		j := i
		for j < len(xs) && xs[j].s == xs[i].s {
			j++
		}
		avg := float64(i+j+1) / 2
		for k := i; k < j; k++ {
			if xs[k].a {
				rankSum += avg
			}
		}
		i = j
	}
	na, nb := float64(m.Attack), float64(m.Benign)
	m.AUC = (rankSum - na*(na+1)/2) / (na * nb)
	return m
}

// ErrNoSessions is returned when a file holds no sessions.
var ErrNoSessions = errors.New("trajectory: no sessions")
