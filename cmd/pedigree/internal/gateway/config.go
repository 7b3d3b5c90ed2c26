package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/registry"
)

// Files of the gateway in the data directory.
const (
	// ConfigFile lists the upstreams (DIR/mcp/upstreams.json).
	ConfigFile = pedigree.MCPConfigFile
	// KeyDir holds the private keys of the principals the gateway signs
	// for (DIR/mcp/keys/, mode 0700; each key 0600).
	KeyDir = "mcp/keys"
)

// The principals every gateway of a data directory signs for besides its
// upstreams' tool principals.
const (
	// AgentPrincipal signs the calls, the memory the agent writes and the
	// start of each session.
	AgentPrincipal = "agent:mcp"
	// UnverifiedPrincipal signs memory content of unknown provenance
	// (written before the gateway, or around it): tier unverified.
	UnverifiedPrincipal = "tool:mcp-unverified"
)

// ErrConfig is a missing or malformed gateway configuration.
var ErrConfig = errors.New("mcp gateway configuration")

// Upstream is one MCP server behind the gateway.
type Upstream struct {
	Name      string   `json:"name"`
	Principal string   `json:"principal"`
	Tier      string   `json:"tier"`
	Command   string   `json:"command"`
	Args      []string `json:"args"`
	Env       []string `json:"env,omitempty"`
	// Memory marks a server with the reference memory server's tools,
	// whose writes and reads the gateway follows.
	Memory bool `json:"memory,omitempty"`
	// Tools are the tool names seen when it was added.
	Tools []string `json:"tools"`
	// Metadata is what the server said of its tools, prompts and
	// resources when it was added: sealed with this file, the operator
	// vouches for it (metadata.go). An upstream without it vouches for
	// nothing: every listing of it is recorded as its content.
	Metadata *Metadata `json:"metadata,omitempty"`
}

// Config is the gateway's part of a data directory.
type Config struct {
	Version   int        `json:"version"`
	Upstreams []Upstream `json:"upstreams"`
}

var namePat = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// ValidateName checks an upstream's name: it becomes a principal
// (tool:NAME), a catalog prefix (NAME.TOOL) and a tool prefix (NAME__TOOL).
func ValidateName(name string) error {
	if !namePat.MatchString(name) || strings.Contains(name, "__") || name == "mcp-unverified" {
		return fmt.Errorf("%w: upstream name %q: want a lowercase letter then up to 31 of [a-z0-9_-], without \"__\"", ErrConfig, name)
	}
	return nil
}

// LoadConfig reads DIR/mcp/upstreams.json; a directory without one has no
// upstreams.
func LoadConfig(dir string) (*Config, error) {
	b, err := safefile.ReadFile(dir, ConfigFile, pedigree.MaxConfigBytes)
	return configFrom(b, err)
}

// LoadSealedConfig reads DIR/mcp/upstreams.json as the operator sealed it
// (pedigree.ReadSealed): after freeze, an upstream's command and principal
// are the ones frozen with the registry, whatever a writer of the
// directory put there since.
func LoadSealedConfig(dir string, view *pedigree.RegistryView) (*Config, error) {
	return configFrom(pedigree.ReadSealed(dir, view, ConfigFile))
}

func configFrom(b []byte, err error) (*Config, error) {
	if errors.Is(err, os.ErrNotExist) {
		return &Config{Version: 1}, nil
	}
	if err != nil {
		return nil, err
	}
	var c Config
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrConfig, ConfigFile, err)
	}
	if c.Version != 1 {
		return nil, fmt.Errorf("%w: %s: version %d, want 1", ErrConfig, ConfigFile, c.Version)
	}
	for _, u := range c.Upstreams {
		if err := ValidateName(u.Name); err != nil {
			return nil, err
		}
		if u.Command == "" {
			return nil, fmt.Errorf("%w: upstream %s has no command", ErrConfig, u.Name)
		}
	}
	return &c, nil
}

// Save writes the configuration (mode 0600), replacing the file at once.
func (c *Config) Save(dir string) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return safefile.WriteFile(dir, ConfigFile, append(b, '\n'), 0o600)
}

// Find returns the upstream called name.
func (c *Config) Find(name string) (Upstream, bool) {
	for _, u := range c.Upstreams {
		if u.Name == name {
			return u, true
		}
	}
	return Upstream{}, false
}

// KeyPath is where the gateway keeps a principal's private key.
func KeyPath(dir, principal string) string {
	return filepath.Join(dir, KeyDir, strings.ReplaceAll(principal, ":", "_")+".key")
}

// LoadSigner loads the key the gateway holds for a principal.
func LoadSigner(dir, principal string) (*registry.Signer, error) {
	s, err := registry.LoadSigner(KeyPath(dir, principal))
	if err != nil {
		return nil, fmt.Errorf("the gateway's key for %s: %w", principal, err)
	}
	return s, nil
}

// DriftDir holds, for 'mcp list', what each upstream offered when a
// gateway last started or heard list_changed (DIR/mcp/offered/NAME.json).
// It is the gateway's observation, not configuration: nothing reads it to
// decide.
const DriftDir = "mcp/offered"

// Drift is what an upstream offered, and when.
type Drift struct {
	Version int       `json:"version"`
	Seen    string    `json:"seen"`
	Offered *Metadata `json:"offered"`
}

// SaveDrift notes what an upstream offers now; an upstream that offers
// what was sealed leaves no note.
func SaveDrift(dir, name string, now *Metadata, at time.Time) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	cfg, err := LoadConfig(dir)
	if err != nil {
		return err
	}
	u, _ := cfg.Find(name)
	rel := filepath.Join(DriftDir, name+".json")
	if len(Diff(u.Metadata, now)) == 0 {
		return safefile.Remove(dir, rel, safefile.Regular)
	}
	b, err := json.MarshalIndent(Drift{Version: 1, Seen: at.UTC().Format(time.RFC3339), Offered: now}, "", "  ")
	if err != nil {
		return err
	}
	return safefile.WriteFile(dir, rel, append(b, '\n'), 0o600)
}

// LoadDrift reads what an upstream last offered, or nil when no note is
// kept.
func LoadDrift(dir, name string) (*Drift, error) {
	b, err := os.ReadFile(filepath.Join(dir, DriftDir, name+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var d Drift
	if err := json.Unmarshal(b, &d); err != nil || d.Version != 1 || d.Offered == nil {
		return nil, fmt.Errorf("%s/%s.json: not a note this version reads", DriftDir, name)
	}
	return &d, nil
}
