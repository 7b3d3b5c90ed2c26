package hook

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/registry"
)

// Workspace trust. The operator vouches for a git repository as of one
// commit: every file tracked in that commit, with exactly the content of
// its blob there, is signed by a repository principal at the tier the
// operator chose (user or internal) when the agent reads it. Nothing else
// is: untracked files, ignored paths (node_modules, vendor, build output),
// a tracked file whose content differs from the declared commit's (modified
// in the working tree, or changed by a commit pulled later), anything
// outside the repository, a repository nobody declared. The declaration
// lives in the hook's mapping (claude-hook.yaml), so it counts only under
// the operator's seal; the list of vouched files and their sha256 is a
// manifest file in the data directory, pinned in the declaration by its own
// sha256.

// Workspace is one declared repository.
type Workspace struct {
	// Root is the repository's top-level directory, absolute, without
	// symlinks.
	Root string `json:"root"`
	// Commit is the commit vouched for (its full object name).
	Commit string `json:"commit"`
	// Tier is the tier its content is signed at: user or internal.
	Tier string `json:"tier"`
	// Manifest is the manifest file, relative to the data directory, and
	// ManifestSHA256 its sha256 (hex).
	Manifest       string `json:"manifest"`
	ManifestSHA256 string `json:"manifest_sha256"`
	// Files is how many files the manifest vouches for.
	Files int `json:"files"`
}

// manifest is the content of a workspace's manifest file: each tracked
// file's path (relative to Root, slash-separated) and the sha256 (hex) of
// its blob at Commit.
type manifest struct {
	Root   string            `json:"root"`
	Commit string            `json:"commit"`
	Files  map[string]string `json:"files"`
}

// WorkspaceDir holds the manifests, in the data directory.
const WorkspaceDir = "claude-workspaces"

// The repository principals DefaultMapping registers, by tier.
const (
	RepoUser     = "repo:claude-workspace-user"
	RepoInternal = "repo:claude-workspace-internal"
)

// ErrWorkspace is a workspace that cannot be declared.
var ErrWorkspace = errors.New("workspace trust refused")

// TrustWorkspace declares the git repository that holds path trusted at
// tier (user or internal) as of its current commit (HEAD): it writes the
// manifest of the commit's tracked files, adds the declaration to the
// hook's mapping (replacing one of the same repository), and, when the
// registry is frozen, seals the configuration again with the operator key
// (operator; opts are Seal's). It is what `pedigree hook claude
// trust-workspace` and `pedigree claude install --trust-workspace` run.
// Nothing is changed when it refuses.
func TrustWorkspace(ctx context.Context, dir, path, tier string, operator *registry.Signer, opts ...pedigree.Option) (*Workspace, error) {
	if tier != registry.User.String() && tier != registry.Internal.String() {
		return nil, fmt.Errorf("%w: tier %q: a workspace is trusted at tier user or internal", ErrWorkspace, tier)
	}
	e, err := pedigree.Open(ctx, dir, opts...)
	if err != nil {
		return nil, err
	}
	view, err := e.Registry(ctx)
	if err != nil {
		e.Close()
		return nil, err
	}
	m, err := loadSealedMapping(dir, view)
	e.Close()
	if err != nil {
		return nil, err
	}
	principal := m.Repository[tier]
	if principal == "" {
		return nil, fmt.Errorf("%w: %s names no repository principal of tier %s: the hook was set up before workspace trust; set it up again in a new data directory", ErrWorkspace, MappingFile, tier)
	}
	if view.Frozen && operator == nil {
		return nil, fmt.Errorf("%w: the registry is frozen: the operator key must seal the declaration", ErrWorkspace)
	}
	root, commit, files, err := gitManifest(ctx, path)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(manifest{Root: root, Commit: commit, Files: files})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	ws := Workspace{Root: root, Commit: commit, Tier: tier, ManifestSHA256: hex.EncodeToString(sum[:]), Files: len(files),
		Manifest: filepath.Join(WorkspaceDir, hex.EncodeToString(sum[:])+".json")}
	if err := os.MkdirAll(filepath.Join(dir, WorkspaceDir), 0o700); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(dir, ws.Manifest), body, 0o600); err != nil {
		return nil, err
	}
	old, err := os.ReadFile(filepath.Join(dir, MappingFile))
	if err != nil {
		return nil, err
	}
	m.Workspaces = slices.DeleteFunc(m.Workspaces, func(w Workspace) bool { return w.Root == root })
	m.Workspaces = append(m.Workspaces, ws)
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWorkspace, err)
	}
	mb, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(dir, MappingFile), append([]byte(mappingHeader), mb...), 0o644); err != nil {
		return nil, err
	}
	if view.Frozen {
		if err := pedigree.Seal(ctx, dir, operator, opts...); err != nil {
			// The mapping the seal does not cover would refuse every event:
			// put the sealed one back.
			writeFile(filepath.Join(dir, MappingFile), old, 0o644)
			return nil, err
		}
	}
	return &ws, nil
}

// Declarations is the hook's mapping as the hook counts it, for
// 'trust-workspace --list': read under the operator's seal (after freeze;
// view is the registry as the caller's backend reports it), with every
// workspace's manifest the one its declaration pins. Any of it that does
// not verify is an error wrapping pedigree.ErrTampered, naming what: the
// hook would refuse every event (a mapping off its seal) or trust none of
// that workspace's files (a manifest off its pin), and a list that showed
// the declarations anyway would tell the person otherwise.
func Declarations(dir string, view *pedigree.RegistryView) (*Mapping, error) {
	m, err := loadSealedMapping(dir, view)
	if err != nil {
		return nil, err
	}
	for i := range m.Workspaces {
		ws := &m.Workspaces[i]
		if _, err := loadManifest(dir, ws); err != nil {
			return nil, fmt.Errorf("%w: the declaration of workspace %s does not verify: %v", pedigree.ErrTampered, ws.Root, err)
		}
	}
	return m, nil
}

// gitManifest reads the repository holding path: its top-level directory,
// its HEAD commit, and the sha256 of each regular file's blob in that
// commit (symlinks and submodules are left out: they vouch for nothing).
func gitManifest(ctx context.Context, path string) (root, commit string, files map[string]string, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", nil, err
	}
	top, err := git(ctx, abs, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", "", nil, fmt.Errorf("%w: %s is not in a git repository: %v", ErrWorkspace, abs, err)
	}
	if root, err = filepath.EvalSymlinks(strings.TrimSpace(string(top))); err != nil {
		return "", "", nil, err
	}
	head, err := git(ctx, root, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", "", nil, fmt.Errorf("%w: %s has no commit to vouch for: %v", ErrWorkspace, root, err)
	}
	commit = strings.TrimSpace(string(head))
	tree, err := git(ctx, root, "ls-tree", "-r", "-z", "--full-tree", commit)
	if err != nil {
		return "", "", nil, err
	}
	var blobs, paths []string
	for _, rec := range strings.Split(strings.TrimSuffix(string(tree), "\x00"), "\x00") {
		meta, p, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 || f[1] != "blob" || (f[0] != "100644" && f[0] != "100755") {
			continue
		}
		blobs, paths = append(blobs, f[2]), append(paths, p)
	}
	files = make(map[string]string, len(paths))
	if len(blobs) == 0 {
		return root, commit, files, nil
	}
	cmd := exec.CommandContext(ctx, "git", "-C", root, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(strings.Join(blobs, "\n") + "\n")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", "", nil, err
	}
	r := bufio.NewReader(out)
	for i := range blobs {
		line, err := r.ReadString('\n')
		if err != nil {
			cmd.Wait()
			return "", "", nil, fmt.Errorf("git cat-file: %v", err)
		}
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != blobs[i] || f[1] != "blob" {
			cmd.Wait()
			return "", "", nil, fmt.Errorf("git cat-file answered %q for %s", strings.TrimSpace(line), blobs[i])
		}
		n, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			cmd.Wait()
			return "", "", nil, err
		}
		h := sha256.New()
		if _, err := io.CopyN(h, r, n); err != nil {
			cmd.Wait()
			return "", "", nil, err
		}
		if _, err := r.Discard(1); err != nil {
			cmd.Wait()
			return "", "", nil, err
		}
		files[paths[i]] = hex.EncodeToString(h.Sum(nil))
	}
	if err := cmd.Wait(); err != nil {
		return "", "", nil, fmt.Errorf("git cat-file: %v", err)
	}
	return root, commit, files, nil
}

func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "GIT_TERMINAL_PROMPT=0")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out, nil
}

// loadManifest reads a workspace's manifest and checks it is the one the
// declaration pins.
func (h *Handler) loadManifest(ws *Workspace) (*manifest, error) {
	return loadManifest(h.dir, ws)
}

func loadManifest(dir string, ws *Workspace) (*manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ws.Manifest))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != ws.ManifestSHA256 {
		return nil, fmt.Errorf("%s is not the manifest the declaration of %s pins", ws.Manifest, ws.Root)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %v", ws.Manifest, err)
	}
	if m.Root != ws.Root || m.Commit != ws.Commit {
		return nil, fmt.Errorf("%s is the manifest of another workspace", ws.Manifest)
	}
	return &m, nil
}

// workspaceOf is the declared workspace that holds path (absolute), with
// path relative to its root, or nil.
func (h *Handler) workspaceOf(path string) (*Workspace, string) {
	if !filepath.IsAbs(path) {
		return nil, ""
	}
	clean := filepath.Clean(path)
	if real, err := filepath.EvalSymlinks(clean); err == nil {
		clean = real
	}
	for i := range h.m.Workspaces {
		ws := &h.m.Workspaces[i]
		rel, err := filepath.Rel(ws.Root, clean)
		if err == nil && filepath.IsLocal(rel) {
			return ws, filepath.ToSlash(rel)
		}
	}
	return nil, ""
}

// vouched says which repository principal vouches for content read from
// path, and why ("" when none does): the file is tracked in a declared
// workspace's commit with exactly this content.
func (h *Handler) vouched(path string, content []byte) (principal, rule string) {
	ws, rel := h.workspaceOf(path)
	if ws == nil {
		return "", ""
	}
	m, err := h.loadManifest(ws)
	if err != nil {
		h.log.Warn("pedigree hook: a workspace manifest does not verify: its files are not trusted", "workspace", ws.Root, "error", err)
		return "", ""
	}
	sum := sha256.Sum256(content)
	if want, ok := m.Files[rel]; !ok || want != hex.EncodeToString(sum[:]) {
		return "", ""
	}
	return h.m.Repository[ws.Tier], fmt.Sprintf("tracked in workspace %s at commit %s, trusted at tier %s", ws.Root, short(ws.Commit), ws.Tier)
}

var hexPat = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// validateWorkspaces checks the mapping's declarations.
func (m *Mapping) validateWorkspaces() error {
	for tier, id := range m.Repository {
		p, ok := m.Principals[id]
		if !ok || (tier != registry.User.String() && tier != registry.Internal.String()) || p.Tier != tier {
			return fmt.Errorf("repository principal %q for tier %q: it must be among the principals, of that tier, user or internal", id, tier)
		}
	}
	for _, ws := range m.Workspaces {
		switch {
		case !filepath.IsAbs(ws.Root) || filepath.Clean(ws.Root) != ws.Root:
			return fmt.Errorf("workspace %q: the root must be an absolute, clean path", ws.Root)
		case !hexPat.MatchString(ws.Commit):
			return fmt.Errorf("workspace %s: commit %q is not a full object name", ws.Root, ws.Commit)
		case m.Repository[ws.Tier] == "":
			return fmt.Errorf("workspace %s: no repository principal of tier %q", ws.Root, ws.Tier)
		case !filepath.IsLocal(ws.Manifest) || !strings.HasPrefix(filepath.ToSlash(ws.Manifest), WorkspaceDir+"/"):
			return fmt.Errorf("workspace %s: manifest %q must be in %s", ws.Root, ws.Manifest, WorkspaceDir)
		case len(ws.ManifestSHA256) != 64:
			return fmt.Errorf("workspace %s: manifest_sha256 must be a sha256", ws.Root)
		}
	}
	return nil
}
