package gate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"

	"github.com/pedigree-ai/pedigree/policies"
)

// DecisionPackage is the Rego package whose `decision` the gate queries.
const DecisionPackage = "pedigree.gate"

const decisionQuery = "data." + DecisionPackage + ".decision"

// Policy is a set of Rego modules and data, with a version that digests them.
type Policy struct {
	Modules   map[string]*ast.Module
	raw       map[string][]byte
	Documents map[string]any
}

// LoadPolicy reads the .rego modules and data files (.json, .yaml) of fsys.
// Rego tests (_test.rego) are left out unless withTests.
func LoadPolicy(fsys fs.FS, withTests bool) (*Policy, error) {
	res, err := loader.NewFileLoader().WithFS(fsys).WithRegoVersion(ast.RegoV1).
		Filtered([]string{"."}, func(_ string, info fs.FileInfo, _ int) bool {
			return !withTests && !info.IsDir() && strings.HasSuffix(info.Name(), "_test.rego")
		})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPolicy, err)
	}
	p := &Policy{Modules: map[string]*ast.Module{}, raw: map[string][]byte{}, Documents: res.Documents}
	for name, f := range res.Modules {
		p.Modules[name] = f.Parsed
		p.raw[name] = f.Raw
	}
	return p, nil
}

// DefaultPolicy is the embedded default policy.
func DefaultPolicy() (*Policy, error) { return LoadPolicy(policies.FS, false) }

// PolicyFromDir loads an operator's policy directory. When one of its
// modules is in package pedigree.gate it replaces the default policy;
// otherwise it extends it (rules in package pedigree.ext add deny and ask
// reasons, and data is merged).
func PolicyFromDir(dir string) (*Policy, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPolicy, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrPolicy, dir)
	}
	op, err := LoadPolicy(os.DirFS(dir), false)
	if err != nil {
		return nil, err
	}
	if len(op.Modules) == 0 {
		return nil, fmt.Errorf("%w: %s holds no .rego module", ErrPolicy, dir)
	}
	for _, m := range op.Modules {
		if m.Package.Path.String() == "data."+DecisionPackage {
			return op, nil
		}
	}
	def, err := DefaultPolicy()
	if err != nil {
		return nil, err
	}
	for name, m := range op.Modules {
		def.Modules["operator/"+name] = m
		def.raw["operator/"+name] = op.raw[name]
	}
	for k, v := range op.Documents {
		if def.Documents == nil {
			def.Documents = map[string]any{}
		}
		def.Documents[k] = v
	}
	return def, nil
}

// version digests the modules, the data and the catalog: two decisions with
// the same input and version were made by the same rules.
func (p *Policy) version(catalog *Catalog) string {
	h := sha256.New()
	names := make([]string, 0, len(p.raw))
	for n := range p.raw {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(h, "module %s %d\n", n, len(p.raw[n]))
		h.Write(p.raw[n])
	}
	data, _ := json.Marshal(p.Documents)
	fmt.Fprintf(h, "data %d\n", len(data))
	h.Write(data)
	cat := catalog.digest()
	fmt.Fprintf(h, "catalog %d\n", len(cat))
	h.Write(cat)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// capabilities are this OPA's builtins less everything that reaches out of
// the process: a policy cannot call the network or read the environment.
func capabilities() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	kept := c.Builtins[:0]
	for _, b := range c.Builtins {
		if b.Name == "http.send" || strings.HasPrefix(b.Name, "net.") || b.Name == "opa.runtime" {
			continue
		}
		kept = append(kept, b)
	}
	c.Builtins = kept
	c.AllowNet = []string{}
	return c
}
