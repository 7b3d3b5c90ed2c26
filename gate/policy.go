package gate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
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
	// lean is set on the embedded default policy alone: it reads of a
	// justification entry only what an untrusted label gives it (a finding
	// names an entry whose effective or reach tier is untrusted, and nothing
	// else in the decision depends on the others), so its input lists only
	// those (see Gate.input). A policy with an operator's modules may read
	// more, and is given every entry.
	lean bool
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
func DefaultPolicy() (*Policy, error) {
	p, err := LoadPolicy(policies.FS, false)
	if err == nil {
		p.lean = true
	}
	return p, err
}

// ExtensionPackage is the Rego package in which an operator's extension adds
// `deny contains msg` and `ask contains msg` reasons.
const ExtensionPackage = "pedigree.ext"

// PolicyFromDir loads an operator's policy directory as an extension of the
// default policy: its rules in package pedigree.ext add deny and ask
// reasons, and its data is merged. A module anywhere else under package
// pedigree (pedigree.gate, or pedigree itself with a rule such as
// `gate.excused(_) := true`) would add clauses to the default policy's own
// rules, so it is refused; to replace the default policy, load the directory
// with ReplacementPolicyFromDir.
func PolicyFromDir(dir string) (*Policy, error) {
	op, err := loadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, name := range sortedNames(op.Modules) {
		if pkg := op.Modules[name].Package.Path.String(); reachesDefault(pkg) {
			return nil, fmt.Errorf("%w: %s: module %s is in package %s: an extension may add rules only in package %s (deny and ask); to replace the whole default policy, say so (--replace-policy)",
				ErrPolicy, dir, name, strings.TrimPrefix(pkg, "data."), ExtensionPackage)
		}
	}
	if pd, ok := op.Documents["pedigree"]; ok {
		m, _ := pd.(map[string]any)
		for k := range m {
			if k != "ext" {
				return nil, fmt.Errorf("%w: %s: its data sets pedigree.%s: an extension's data may go only under %s", ErrPolicy, dir, k, ExtensionPackage)
			}
		}
		if m == nil {
			return nil, fmt.Errorf("%w: %s: its data sets pedigree itself: an extension's data may go only under %s", ErrPolicy, dir, ExtensionPackage)
		}
	}
	def, err := DefaultPolicy()
	if err != nil {
		return nil, err
	}
	def.lean = false
	for name, m := range op.Modules {
		def.Modules["operator/"+name] = m
		def.raw["operator/"+name] = op.raw[name]
	}
	docs := map[string]any{}
	maps.Copy(docs, def.Documents)
	maps.Copy(docs, op.Documents)
	def.Documents = docs
	return def, nil
}

// ReplacementPolicyFromDir loads an operator's policy directory as the whole
// policy, in place of the default: it must define package pedigree.gate's
// decision itself.
func ReplacementPolicyFromDir(dir string) (*Policy, error) {
	op, err := loadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, m := range op.Modules {
		if m.Package.Path.String() == "data."+DecisionPackage {
			return op, nil
		}
	}
	return nil, fmt.Errorf("%w: %s replaces the default policy but holds no module in package %s", ErrPolicy, dir, DecisionPackage)
}

func loadDir(dir string) (*Policy, error) {
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
	return op, nil
}

// reachesDefault reports whether a module in package pkg (as data.a.b) can
// define rules that the default policy reads: anything under data.pedigree
// but the extension package.
func reachesDefault(pkg string) bool {
	const root, ext = "data.pedigree", "data." + ExtensionPackage
	under := func(p, base string) bool { return p == base || strings.HasPrefix(p, base+".") }
	return under(pkg, root) && !under(pkg, ext)
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
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
