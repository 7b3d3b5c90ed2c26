package trajectory

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/pedigree-ai/pedigree/internal/safefile"
	"math"
	"os"
	"path/filepath"
	"slices"
)

// Model is an L2-regularised logistic regression over the structural
// features. We chose it over boosted trees because its weights can be read
// (which feature pushes a session towards "attack"), it trains in
// milliseconds in pure Go, and with a few dozen features and a few thousand
// sessions trees would mostly memorise the generator.
type Model struct {
	Version   int       `json:"version"`
	Features  []string  `json:"features"`
	Mean      []float64 `json:"mean"`
	Std       []float64 `json:"std"`
	Weights   []float64 `json:"weights"`
	Bias      float64   `json:"bias"`
	Threshold float64   `json:"threshold"`
}

// TrainOptions tune training. The threshold is fixed in advance (0.5 by
// default), never fitted to the data it is reported on.
type TrainOptions struct {
	Epochs    int
	Rate      float64
	L2        float64
	Threshold float64
}

func (o *TrainOptions) defaults() {
	if o.Epochs <= 0 {
		o.Epochs = 300
	}
	if o.Rate <= 0 {
		o.Rate = 0.5
	}
	if o.L2 < 0 {
		o.L2 = 0
	} else if o.L2 == 0 {
		o.L2 = 1e-3
	}
	if o.Threshold <= 0 || o.Threshold >= 1 {
		o.Threshold = 0.5
	}
}

// Train fits a model by full-batch gradient descent on standardised features.
func Train(x [][]float64, y []bool, o TrainOptions) (*Model, error) {
	o.defaults()
	if len(x) == 0 || len(x) != len(y) {
		return nil, errors.New("trajectory: training needs as many labels as samples, and at least one")
	}
	if !slices.Contains(y, true) || !slices.Contains(y, false) {
		return nil, errors.New("trajectory: training needs both attack and benign sessions")
	}
	d := len(x[0])
	m := &Model{Version: 1, Features: slices.Clone(FeatureNames), Mean: make([]float64, d), Std: make([]float64, d), Weights: make([]float64, d), Threshold: o.Threshold}
	if d != len(FeatureNames) {
		return nil, fmt.Errorf("trajectory: %d features, want %d", d, len(FeatureNames))
	}
	n := float64(len(x))
	for _, r := range x {
		for j, v := range r {
			m.Mean[j] += v / n
		}
	}
	for _, r := range x {
		for j, v := range r {
			m.Std[j] += (v - m.Mean[j]) * (v - m.Mean[j]) / n
		}
	}
	for j := range m.Std {
		m.Std[j] = math.Sqrt(m.Std[j])
		if m.Std[j] < 1e-9 {
			m.Std[j] = 1
		}
	}
	z := make([][]float64, len(x))
	for i, r := range x {
		z[i] = m.standardise(r)
	}
	grad := make([]float64, d)
	for range o.Epochs {
		clear(grad)
		var gb float64
		for i, r := range z {
			p := sigmoid(dot(m.Weights, r) + m.Bias)
			t := 0.0
			if y[i] {
				t = 1
			}
			for j, v := range r {
				grad[j] += (p - t) * v / n
			}
			gb += (p - t) / n
		}
		for j := range m.Weights {
			m.Weights[j] -= o.Rate * (grad[j] + o.L2*m.Weights[j])
		}
		m.Bias -= o.Rate * gb
	}
	return m, nil
}

func (m *Model) standardise(f []float64) []float64 {
	z := make([]float64, len(f))
	for j, v := range f {
		z[j] = (v - m.Mean[j]) / m.Std[j]
	}
	return z
}

// Score is the model's probability that a session with these features is
// an attack.
func (m *Model) Score(f []float64) float64 {
	if len(f) != len(m.Weights) {
		return 0
	}
	return sigmoid(dot(m.Weights, m.standardise(f)) + m.Bias)
}

func sigmoid(v float64) float64 { return 1 / (1 + math.Exp(-v)) }

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// Save writes the model as JSON.
func (m *Model) Save(path string) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return safefile.WriteFile(filepath.Dir(path), filepath.Base(path), append(b, '\n'), 0o644)
}

// LoadModel reads a model saved by Save and checks that it matches the
// features this build computes.
func LoadModel(path string) (*Model, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("trajectory model: %w", err)
	}
	return ParseModel(path, b)
}

// ParseModel reads a model saved by Save from its bytes (path names it in
// errors) and checks that it matches the features this build computes.
func ParseModel(path string, b []byte) (*Model, error) {
	var m Model
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("trajectory model %s: %w", path, err)
	}
	d := len(FeatureNames)
	if m.Version != 1 || !slices.Equal(m.Features, FeatureNames) || len(m.Mean) != d || len(m.Std) != d || len(m.Weights) != d {
		return nil, fmt.Errorf("trajectory model %s was trained on other features than this build computes", path)
	}
	if m.Threshold <= 0 || m.Threshold >= 1 {
		return nil, fmt.Errorf("trajectory model %s: threshold %v outside (0, 1)", path, m.Threshold)
	}
	return &m, nil
}
