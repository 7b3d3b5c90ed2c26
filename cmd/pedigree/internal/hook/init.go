package hook

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/registry"
)

// TokenFile holds the bearer token that Claude Code's http hooks send to
// the sidecar's /v1/hooks/claude (mode 0600).
const TokenFile = KeyDir + "/http-token"

// Token reads the data directory's http hook token.
func Token(dir string) (string, error) {
	b, err := safefile.ReadFile(dir, TokenFile, 1<<10)
	if err != nil {
		return "", fmt.Errorf("the http hook token: %w (run 'pedigree hook claude init')", err)
	}
	t := strings.TrimSpace(string(b))
	if len(t) < 32 {
		return "", fmt.Errorf("the http hook token in %s is too short", TokenFile)
	}
	return t, nil
}

// ErrInit is an init that cannot go ahead; nothing was changed.
var ErrInit = errors.New("hook init refused")

// Init registers the mapping's principals (before freeze), writes their
// private keys into the data directory (mode 0600), merges the default
// catalog entries into its tools.yaml, and writes the mapping. Everything
// that can refuse is checked before anything is written; a catalog entry
// that differs from one already in tools.yaml is refused.
func Init(ctx context.Context, e *pedigree.Engine, m *Mapping) error {
	dir := e.Dir()
	if dir == "" {
		return fmt.Errorf("%w: the hook needs a data directory", ErrInit)
	}
	if err := m.validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInit, err)
	}
	reg, err := e.Registry(ctx)
	if err != nil {
		return err
	}
	if reg.Frozen {
		return fmt.Errorf("%w: %w: run 'pedigree hook claude init' before 'registry freeze'", ErrInit, registry.ErrFrozen)
	}
	if _, err := os.Stat(filepath.Join(dir, MappingFile)); err == nil {
		return fmt.Errorf("%w: %s already exists: the hook is set up", ErrInit, MappingFile)
	}
	for _, id := range m.ids() {
		if _, dup := reg.Lookup(id); dup {
			return fmt.Errorf("%w: %w: %s", ErrInit, registry.ErrDuplicate, id)
		}
		if _, err := os.Stat(filepath.Join(dir, m.Principals[id].Key)); err == nil {
			return fmt.Errorf("%w: the key file %s already exists", ErrInit, m.Principals[id].Key)
		}
	}
	catalog, err := mergeCatalog(filepath.Join(dir, pedigree.ToolsFile), DefaultCatalog())
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInit, err)
	}

	var written []string
	undo := func(err error) error {
		for _, p := range written {
			safefile.Remove(filepath.Dir(p), filepath.Base(p), safefile.Regular)
		}
		return err
	}
	if err := safefile.MkdirAll(dir, KeyDir, 0o700); err != nil {
		return err
	}
	principals := make([]registry.Principal, 0, len(m.Principals))
	for _, id := range m.ids() {
		p := m.Principals[id]
		tier, _ := registry.ParseTier(p.Tier)
		s, priv, err := registry.GenerateSigner(nil)
		if err != nil {
			return undo(err)
		}
		path := filepath.Join(dir, p.Key)
		if err := safefile.MkdirAll(dir, filepath.Dir(p.Key), 0o700); err != nil {
			return undo(err)
		}
		if err := registry.WritePrivateKeyFile(path, priv); err != nil {
			return undo(err)
		}
		written = append(written, path)
		// The user answers Claude Code's permission prompt: when an asked
		// call then runs, the hook records that as the user's approval, so
		// the user principal holds approval authority (and only it: the
		// repository principal of tier user approves nothing).
		principals = append(principals, registry.Principal{ID: id, Tier: tier, PublicKey: s.Public(), Approver: id == m.User})
	}
	token := make([]byte, 32)
	if _, err := rand.Read(token); err != nil {
		return undo(err)
	}
	tokenPath := filepath.Join(dir, TokenFile)
	if err := safefile.WriteFile(dir, TokenFile, []byte(hex.EncodeToString(token)+"\n"), 0o600); err != nil {
		return undo(err)
	}
	written = append(written, tokenPath)
	b, err := yaml.Marshal(catalog)
	if err != nil {
		return undo(err)
	}
	mb, err := yaml.Marshal(m)
	if err != nil {
		return undo(err)
	}
	for _, p := range principals {
		if err := e.Bootstrap().AddPrincipal(ctx, p); err != nil {
			return undo(err)
		}
	}
	if err := writeFile(filepath.Join(dir, pedigree.ToolsFile), b, 0o644); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, MappingFile), append([]byte(mappingHeader), mb...), 0o644)
}

const mappingHeader = `# Written by 'pedigree hook claude init'. Whom the Claude Code hook signs for:
# the user's prompts, the agent's calls, and each tool's output (by Claude Code
# tool name; mcp: every MCP tool; default: every other tool). The catalog
# entries (which tools are sensitive) are in tools.yaml.
`

// mergeCatalog adds add's tools to the catalog at path (when it exists). A
// tool already there with another entry is refused: the operator's entry
// is not overwritten, nor silently kept in place of the hook's.
func mergeCatalog(path string, add *gate.Catalog) (*gate.Catalog, error) {
	have := &gate.Catalog{Tools: map[string]gate.Tool{}}
	if _, err := os.Stat(path); err == nil {
		if have, err = gate.LoadCatalog(path); err != nil {
			return nil, err
		}
	}
	var conflicts []string
	for name, t := range add.Tools {
		old, ok := have.Tools[name]
		if ok && !reflect.DeepEqual(old, t) {
			conflicts = append(conflicts, name)
			continue
		}
		have.Tools[name] = t
	}
	if len(conflicts) > 0 {
		sort.Strings(conflicts)
		return nil, fmt.Errorf("%s already has other entries for %v: remove them or make them match the hook's (see 'pedigree hook claude init --help')", filepath.Base(path), conflicts)
	}
	return have, nil
}

// writeFile replaces path atomically.
func writeFile(path string, b []byte, mode os.FileMode) error {
	return safefile.WriteFile(filepath.Dir(path), filepath.Base(path), b, mode)
}
