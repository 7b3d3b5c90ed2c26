package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/cmd/pedigree/internal/gateway"
	"github.com/pedigree-ai/pedigree/internal/safetext"
	"github.com/pedigree-ai/pedigree/registry"
)

// The one-line gateway: 'pedigree mcp run -- COMMAND ARGS...' in an
// mcpServers entry, on a machine where nothing is set up. The first run
// makes a per-user directory for that command, registers the upstream at
// the conservative tier, drafts its catalog, freezes and seals; every run
// then serves it as 'mcp run' does.

// registryOnStart is a warning when command fetches its package from a
// registry each time it starts (a start that hangs offline, and runs
// whatever the registry serves that day), else "".
func registryOnStart(command []string) string {
	if len(command) == 0 {
		return ""
	}
	base := filepath.Base(command[0])
	args := command[1:]
	has := func(flags ...string) bool {
		return slices.ContainsFunc(args, func(a string) bool { return slices.Contains(flags, a) })
	}
	fix := "install the server once (npm install in a directory of its own, with its lockfile) and run it with 'node .../dist/index.js', or 'npx --no-install PACKAGE'"
	switch {
	case base == "npx" && !has("--no-install", "--offline"):
		return fmt.Sprintf("'%s' asks the npm registry at every start (offline it hangs until npm gives up; online it adds seconds and runs whatever version is published that day): %s", strings.Join(command, " "), fix)
	case base == "uvx", base == "pipx" && len(args) > 0 && args[0] == "run":
		return fmt.Sprintf("'%s' resolves its package from the Python package index at every start: install it once (uv tool install / pipx install) and run the installed command", strings.Join(command, " "))
	case base == "bunx", (base == "pnpm" || base == "yarn") && len(args) > 0 && args[0] == "dlx":
		return fmt.Sprintf("'%s' fetches its package from the registry at every start: %s", strings.Join(command, " "), fix)
	}
	return ""
}

// runners are commands that run the word after them; the upstream's name
// comes from that word.
var runners = []string{"npx", "uvx", "bunx", "pnpm", "yarn", "dlx", "node", "deno", "bun", "python", "python3", "uv", "run", "pipx", "exec", "docker"}

// scriptExt are the extensions of scripts a runner runs.
var scriptExt = map[string]bool{".js": true, ".mjs": true, ".cjs": true, ".ts": true, ".py": true, ".sh": true, ".rb": true}

var nameClean = regexp.MustCompile(`[^a-z0-9_-]+`)

// upstreamName names an upstream from its command: the package or script
// it runs, without scope, version, "mcp-server-"/"server-" and the like
// ("npx -y @modelcontextprotocol/server-memory" is "memory").
func upstreamName(command []string) string {
	word := ""
	for _, w := range command {
		if strings.HasPrefix(w, "-") || slices.Contains(runners, filepath.Base(w)) {
			continue
		}
		word = w
		break
	}
	// A script: the directory that holds it, above dist/, build/, src/.
	parts := strings.Split(filepath.ToSlash(word), "/")
	if len(parts) > 1 && scriptExt[filepath.Ext(parts[len(parts)-1])] {
		parts = parts[:len(parts)-1]
	}
	for len(parts) > 1 && slices.Contains([]string{"dist", "build", "src", "lib", "bin", ""}, parts[len(parts)-1]) {
		parts = parts[:len(parts)-1]
	}
	name := parts[len(parts)-1]
	if i := strings.LastIndex(name, "@"); i > 0 {
		name = name[:i] // a version
	}
	if scriptExt[filepath.Ext(name)] {
		name = strings.TrimSuffix(name, filepath.Ext(name))
	}
	name = strings.ToLower(name)
	for _, p := range []string{"mcp-server-", "server-", "mcp-"} {
		name = strings.TrimPrefix(name, p)
	}
	name = strings.TrimSuffix(strings.TrimSuffix(name, "-mcp-server"), "-mcp")
	name = strings.Trim(nameClean.ReplaceAllString(name, "-"), "-_")
	name = strings.ReplaceAll(name, "__", "_")
	if len(name) > 32 {
		name = name[:32]
	}
	if name == "" || name[0] < 'a' || name[0] > 'z' || gateway.ValidateName(name) != nil {
		name = "upstream"
	}
	return name
}

// oneLineDir is the per-user directory of a one-line gateway: --dir or
// $PEDIGREE_DIR when given, else one per command line under the user's
// data directory ($XDG_DATA_HOME/pedigree/mcp/NAME-H, H from the command).
func (a *app) oneLineDir(explicit bool, name string, command []string) (string, error) {
	if explicit {
		return filepath.Abs(a.dir)
	}
	if d := a.getenv("PEDIGREE_DIR"); d != "" {
		return filepath.Abs(d)
	}
	base := ""
	switch {
	case a.getenv("XDG_DATA_HOME") != "":
		base = filepath.Join(a.getenv("XDG_DATA_HOME"), "pedigree")
	case a.getenv("HOME") != "":
		base = filepath.Join(a.getenv("HOME"), ".local", "share", "pedigree")
	default:
		return "", errors.New("no per-user data directory: HOME is not set (set HOME or XDG_DATA_HOME, or pass --dir DIR)")
	}
	b, _ := json.Marshal(command)
	h := sha256.Sum256(b)
	return filepath.Join(base, "mcp", name+"-"+hex.EncodeToString(h[:4])), nil
}

// bootstrapOneLine makes a.dir ready to serve command: on first run it
// initialises the store, adds the upstream at the external tier, and
// freezes (which seals the catalog and the command); later runs check the
// command is the one that was sealed. What it did goes to stderr.
func (a *app) bootstrapOneLine(ctx context.Context, name string, command []string) error {
	say := func(format string, args ...any) { fmt.Fprintf(a.errw, "pedigree: "+format+"\n", args...) }
	if w := registryOnStart(command); w != "" {
		say("warning: %s", w)
	}
	b, err := a.backend(ctx)
	if errors.Is(err, pedigree.ErrNotInitialized) {
		key, kerr := a.defaultOperatorKey()
		if kerr != nil {
			return kerr
		}
		if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
			return fmt.Errorf("keys directory: %w", err)
		}
		var e *pedigree.Engine
		if e, err = pedigree.Init(ctx, a.dir, pedigree.DefaultTau, append([]pedigree.Option{pedigree.WithClock(a.clock), pedigree.WithOperatorKeyFile(key)}, a.storeKeys()...)...); err == nil {
			say("first run: created the data directory %s (operator key %s)", a.dir, key)
			b = e
		}
	}
	if err != nil {
		return err
	}
	defer b.Close()
	reg, err := b.Registry(ctx)
	if err != nil {
		return err
	}
	cfg, err := gateway.LoadConfig(a.dir)
	if err != nil {
		return err
	}
	if reg.Frozen {
		// A directory frozen by an operator this user does not pin is
		// someone else's setup (red team: an .mcp.json entry's env named
		// a store in the repository, sealed with the attacker's keys, the
		// upstream at tier internal and its tools not sensitive).
		if kind, err := a.pinnedKind(); err != nil || kind == "" {
			return fmt.Errorf("%w: %s is frozen, but no trust root of yours pins it (no operator key for it in your keys directory, no --trust-root): the one-line gateway serves only a directory its own first run made; leave --dir and $PEDIGREE_DIR out, or pin the operator's key with --trust-root", pedigree.ErrTrustRoot, a.dir)
		}
		if slices.ContainsFunc(cfg.Upstreams, func(u gateway.Upstream) bool { return sameCommand(u, command) }) {
			say("serving '%s' from %s, as set up on its first run", strings.Join(command, " "), a.dir)
		} else {
			return fmt.Errorf("%w: %s was frozen without the upstream '%s': the one-line form needs a directory of its own (leave --dir and $PEDIGREE_DIR out), or add it with 'mcp add' before freeze", registry.ErrFrozen, a.dir, strings.Join(command, " "))
		}
		return nil
	}
	e, ok := b.(*pedigree.Engine)
	if !ok {
		return fmt.Errorf("%w: %s is served but not frozen: stop the server, or freeze it", errServed, a.dir)
	}
	if !slices.ContainsFunc(cfg.Upstreams, func(u gateway.Upstream) bool { return sameCommand(u, command) }) {
		out, err := a.addUpstream(ctx, e, gateway.Upstream{Name: name, Principal: "tool:" + name, Tier: registry.External.String(), Command: command[0], Args: command[1:]}, false)
		if err != nil {
			return err
		}
		say("added the upstream %s as %s at tier external: everything it returns counts as untrusted, so a sensitive call that relies on it is denied", name, out.Principal)
		say("drafted %d catalog entries in %s: read-only tools (readOnlyHint) are not sensitive; every other tool is sensitive, irreversible and an external sink unless its annotations say otherwise", len(out.CatalogAdded), filepath.Join(a.dir, pedigree.ToolsFile))
		if len(out.Flagged) == 0 {
			say("sealed what the upstream says of its tools: listing them taints no session; anything it changes later is recorded as its content")
		} else {
			say("sealed what the upstream says of its tools except %d place(s) that read like instructions to the model, which are recorded as its content in every session that lists them:", len(out.Flagged))
			for _, f := range out.Flagged {
				say("  %s", safetext.Message(f.String(), 0))
			}
		}
	}
	op, err := a.loadOperator("")
	if err != nil {
		return err
	}
	if err := e.Bootstrap().Freeze(ctx, op); err != nil {
		return err
	}
	say("froze the registry and sealed the catalog and the command; approvals: none through the host (a call the policy asks about is refused with the 'gate approve' command to run)")
	say("to take control (another tier, your catalog, an approver), set it up by hand: see 'pedigree mcp --help'; to start over, delete %s", a.dir)
	return nil
}

// sameCommand says whether u runs command.
func sameCommand(u gateway.Upstream, command []string) bool {
	return slices.Equal(append([]string{u.Command}, u.Args...), command)
}
