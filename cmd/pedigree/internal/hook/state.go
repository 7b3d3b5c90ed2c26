package hook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	"github.com/pedigree-ai/pedigree/gate"
	"github.com/pedigree-ai/pedigree/internal/safefile"
)

// State remembers, per session and tool_use_id, the call a PreToolUse
// checked, so that the PostToolUse of the same tool use can name that call
// as its output's parent. A session ID may hold a '/': file names are
// digests of the IDs, never the IDs.
//
// What is kept here cannot make a call pass: a tool's output is signed by a
// tool principal of an untrusted tier whichever call it names, and a lost
// or unreadable record only makes the output derive from the session's
// whole context instead.
type State struct{ dir string }

// Use is what is remembered of one tool use.
type Use struct {
	Session    string       `json:"session"`
	ToolUseID  string       `json:"tool_use_id"`
	Tool       string       `json:"tool"`
	CallID     string       `json:"call_id"`
	DecisionID string       `json:"decision_id"`
	Decision   gate.Outcome `json:"decision"`
	// Output is the tool_output entry recorded for it, once it is.
	Output string `json:"output,omitempty"`
	// Approval is the user's approval recorded when an asked call ran.
	Approval string `json:"approval,omitempty"`
}

// NewState keeps state under dir (the data directory's hook-state).
func NewState(dir string) *State { return &State{dir: dir} }

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:16])
}

// The state's files are reached from the data directory (the parent of
// s.dir) through package safefile: a link planted anywhere under it is
// refused, never followed.

// maxStateFile bounds a state file read back.
const maxStateFile = 16 << 20

func (s *State) base() string { return filepath.Dir(s.dir) }

// rel is p (under s.dir) relative to the data directory.
func (s *State) rel(p string) string {
	r, err := filepath.Rel(s.base(), p)
	if err != nil {
		return p // refused by safefile: not a relative name
	}
	return r
}

func (s *State) read(p string) ([]byte, error) {
	return safefile.ReadFile(s.base(), s.rel(p), maxStateFile)
}

func (s *State) write(p string, b []byte) error {
	return safefile.WriteFile(s.base(), s.rel(p), b, 0o600)
}

func (s *State) session(session string) string {
	return filepath.Join(s.dir, "claude", digest(session))
}

func (s *State) path(session, toolUseID string) string {
	return filepath.Join(s.session(session), digest(toolUseID)+".json")
}

// Get returns the use recorded for a tool_use_id, or nil.
func (s *State) Get(session, toolUseID string) (*Use, error) {
	if toolUseID == "" {
		return nil, nil
	}
	b, err := s.read(s.path(session, toolUseID))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var u Use
	if err := json.Unmarshal(b, &u); err != nil || u.Session != session || u.ToolUseID != toolUseID {
		// Not ours, or damaged: the output falls back to the context.
		return nil, nil
	}
	return &u, nil
}

// Put records a use, replacing the file atomically (hooks run in parallel).
func (s *State) Put(u *Use) error {
	if u.ToolUseID == "" {
		return nil
	}
	b, err := json.Marshal(u)
	if err != nil {
		return err
	}
	return s.write(s.path(u.Session, u.ToolUseID), b)
}

// unrecordedFile marks a session one of whose tool results could not be
// recorded: its context is incomplete, so the session's next sensitive
// calls are denied. The mark can only make the hook stricter.
const unrecordedFile = "unrecorded"

func (s *State) unrecordedPath(session string) string {
	return filepath.Join(s.session(session), unrecordedFile)
}

// MarkUnrecorded marks the session (best effort: the caller is already
// failing).
func (s *State) MarkUnrecorded(session, why string) {
	s.write(s.unrecordedPath(session), []byte(why+"\n"))
}

// Unrecorded says why a session is marked ("" when it is not).
func (s *State) Unrecorded(session string) string {
	b, err := s.read(s.unrecordedPath(session))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil || len(b) == 0 {
		return "its mark could not be read"
	}
	return string(b[:len(b)-1])
}
