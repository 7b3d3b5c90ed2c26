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
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/pedigree-ai/pedigree/internal/safefile"

	"github.com/pedigree-ai/pedigree"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// The transcript is the ground truth of what the model was sent. At each
// UserPromptSubmit and PreToolUse the hook reads what the transcript gained
// since it last read it, and records every item the session's context does
// not hold yet (transcript.go says what an item is):
//
//   - An item whose content (or the form the event path records: a tool's
//     tool_response, a mentioned file's bytes) is an entry in the session's
//     context is recorded already. The event path wins where it recorded:
//     its prompt entry is the person's, its tool output derives from its
//     call.
//   - Else, when entries of that content are stored in other sessions
//     (a fork, a --continue, a resume under a new ID), those entries are
//     recalled into the session: inherited content enters at the tier of
//     the entries it matches.
//   - Else it is recorded as new content: a tool's result signed by the
//     tool's output principal, a file by the Read tool's, an MCP resource
//     by the MCP principal's, everything else (user text the hook never saw
//     typed, hook context, images, unknown attachments, a summary of content
//     the session does not hold) by the unverified principal.
//
// What was read is kept in the session's state, signed with the agent's
// key: a state that does not verify is no state, and the whole transcript
// is read again. Nothing in the state can skip an item: a bad signature, a
// transcript whose bytes before the offset changed, a transcript of another
// path, all read from the start; and every read item is matched against
// the store, not against the state. A transcript that existed and then
// vanished or shrank fails closed: the session is marked incomplete, and
// its calls are denied.

// tailLen is how many bytes before the offset are kept as a digest, to
// see that the transcript read is still the one on disk.
const tailLen = 4096

// maxTranscriptLine bounds one line of a transcript: larger is an error
// (the event is blocked), never a line skipped.
const maxTranscriptLine = 64 << 20

// maxPendingTools bounds the tool uses remembered between reads; past it
// the oldest result is signed by the default principal and never skipped.
const maxPendingTools = 1024

// maxRecall bounds the entries of one content recalled into a session.
const maxRecall = 64

// readState is what the hook has read of one session's transcript.
type readState struct {
	Session string `json:"session"`
	Path    string `json:"path"`
	Offset  int64  `json:"offset"`
	// Tail is the digest of the tailLen bytes before Offset.
	Tail string `json:"tail"`
	// Tools are the tool uses read whose results were not yet.
	Tools map[string]string `json:"tools,omitempty"`
	// Typed are the tag lines of slash commands the person typed in this
	// session whose text was not read yet, by line: the prompt they stand
	// for (slash.go).
	Typed map[string]string `json:"typed,omitempty"`
	Sig   []byte            `json:"sig,omitempty"`
}

func (r *readState) signed() []byte {
	c := *r
	c.Sig = nil
	b, _ := json.Marshal(&c)
	return append([]byte("pedigree hook transcript read state\n"), b...)
}

// readPath is the read state of one transcript of a session (a
// subagent's events may name its own).
func (s *State) readPath(session, path string) string {
	return filepath.Join(s.session(session), "transcript-"+digest(path)+".json")
}

// forgetReads drops what was read of the session's transcripts: Claude
// Code sends the model the whole transcript again when it resumes, so the
// next event reads it all, and what was edited on disk in between is seen.
func (s *State) forgetReads(session string) error {
	files, err := filepath.Glob(filepath.Join(s.session(session), "transcript-*.json"))
	if err != nil {
		return err
	}
	for _, f := range files {
		rel, err := filepath.Rel(filepath.Dir(s.dir), f)
		if err != nil {
			return err
		}
		if err := safefile.Remove(filepath.Dir(s.dir), rel, safefile.Regular); err != nil {
			return err
		}
	}
	return nil
}

// loadRead returns the session's read state if it verifies under pub and
// is of this session and path; else a state that reads from the start.
func (s *State) loadRead(session, path string, pub registry.PublicKey) *readState {
	fresh := &readState{Session: session, Path: path}
	b, err := os.ReadFile(s.readPath(session, path))
	if err != nil {
		return fresh
	}
	var r readState
	if json.Unmarshal(b, &r) != nil || r.Session != session || r.Path != path || r.Offset < 0 {
		return fresh
	}
	if v, err := registry.NewVerifier(pub); err != nil || v.Verify(r.Sig, r.signed()) != nil {
		return fresh
	}
	return &r
}

func (s *State) putRead(r *readState, signer *registry.Signer) error {
	sig, err := signer.Sign(r.signed())
	if err != nil {
		return err
	}
	r.Sig = sig
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	// No link under the state directory is followed (a writer of the
	// directory could plant one at the name or its temporary).
	base := filepath.Dir(s.dir) // the data directory, which exists
	rel, err := filepath.Rel(base, s.readPath(r.Session, r.Path))
	if err != nil {
		return err
	}
	return safefile.WriteFile(base, rel, b, 0o600)
}

// A session that starts from an earlier conversation it has no record of
// (SessionStart with source "fork", or "resume" of an ID with no context
// in the store) is sent that conversation whole, and the hook learns of
// it only from the session's transcript, which Claude Code writes on its
// own schedule: measured with the real client, 54 of 472 PreToolUse events
// found their session's transcript not written yet. A new session loses
// nothing by that (its events hold all its transcript could), a fork would
// lose the whole conversation it inherited. So SessionStart marks such a
// session with the time it started, and a PreToolUse in it waits, reading
// the transcript every forkPoll, until the transcript shows where the
// inherited conversation ends: Claude Code copies it first, each line with
// its first timestamp, and then appends the session's own lines, written
// after it started. The wait ends at
//
//   - a conversation line (one with a uuid) timestamped at or after the
//     session's start (the real client's own prompt line came 0.12-1.12 s
//     after the hook handled SessionStart, in 30 runs; the inherited lines
//     keep the earlier conversation's times), or
//   - a prompt the person typed in the session (the event path's prompt
//     entry) that no other session holds: a prompt the inherited
//     conversation also holds ("continue") could be its copy, and ends
//     nothing;
//
// and the mark is dropped (a call waiting beside it stops waiting when the
// mark is gone: the read that dropped it recorded the conversation). Past
// forkWait the call is stopped, naming why, and the session is not marked
// otherwise: the next call waits again. UserPromptSubmit never waits: its
// prompt is written after it returns. The mark is not signed: removing it
// would undo the wait as surely as forging its time, and a writer of the
// data directory can read the hook's keys (docs/hooks.md).
const (
	forkWait = 2 * time.Second
	forkPoll = 20 * time.Millisecond
)

// inheritsFile marks a session whose transcript has not yet shown the end
// of the conversation it started from.
const inheritsFile = "inherits"

// inheritMark is what the mark holds.
type inheritMark struct {
	Source string `json:"source"`
	// Since is when the hook handled the session's SessionStart, to the
	// millisecond (as Claude Code writes its timestamps).
	Since time.Time `json:"since"`
}

// unreadable is the start of a session whose mark cannot be read: no line
// is after it, so only the person's own prompt ends the wait.
var unreadable = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

func (s *State) inheritsPath(session string) string {
	return filepath.Join(s.session(session), inheritsFile)
}

// markInherits marks a session that starts from an earlier conversation.
func (s *State) markInherits(session, source string, since time.Time) error {
	b, err := json.Marshal(inheritMark{Source: source, Since: since.UTC().Truncate(time.Millisecond)})
	if err != nil {
		return err
	}
	return s.write(s.inheritsPath(session), b)
}

// inherits is the session's mark, if it is marked; a mark that cannot be
// read counts, with a start no line is after.
func (s *State) inherits(session string) (since time.Time, marked bool) {
	b, err := s.read(s.inheritsPath(session))
	if errors.Is(err, os.ErrNotExist) {
		return time.Time{}, false
	}
	var m inheritMark
	if err != nil || json.Unmarshal(b, &m) != nil || m.Since.IsZero() {
		return unreadable, true
	}
	return m.Since, true
}

func (s *State) settled(session string) error {
	err := safefile.Remove(s.base(), s.rel(s.inheritsPath(session)), safefile.Regular)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// transcript reads what the event's transcript gained and records it.
func (h *Handler) transcript(ctx context.Context, ev *Event) error {
	since, marked := h.state.inherits(ev.SessionID)
	if ev.TranscriptPath == "" {
		if marked && ev.HookEventName == PreToolUse {
			return fmt.Errorf("%w: this session started from an earlier conversation, and the event names no transcript to read it from", ErrForkUnread)
		}
		return nil
	}
	if !marked {
		if _, err := h.readTranscript(ctx, ev, time.Time{}); err != nil {
			return err
		}
		return h.subagentTranscript(ctx, ev)
	}
	wait := h.forkWait
	if ev.HookEventName != PreToolUse {
		wait = 0
	}
	began := time.Now()
	for {
		ended, err := h.readTranscript(ctx, ev, since)
		if err != nil {
			return err
		}
		if ended {
			if err := h.subagentTranscript(ctx, ev); err != nil {
				return err
			}
			return h.state.settled(ev.SessionID)
		}
		if wait == 0 {
			return nil
		}
		if _, still := h.state.inherits(ev.SessionID); !still {
			return nil // another event's read reached the end, and recorded what came before it
		}
		if time.Since(began) >= wait {
			return fmt.Errorf("%w: this session started from an earlier conversation, and its transcript %s did not show where that conversation ends within %s; the call is stopped, and the next one waits again", ErrForkUnread, clip(ev.TranscriptPath), wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(forkPoll):
		}
	}
}

// agentPat is a subagent's ID as Claude Code names its transcript.
var agentPat = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// subagentTranscript reads what a subagent's own transcript gained, when
// the event is a subagent's (agent_id): Claude Code writes a subagent's
// turns to <session>/subagents/agent-<id>.jsonl beside the session's
// transcript, and some of what the subagent is sent is there alone (the
// text of a command or skill that forks into a subagent).
func (h *Handler) subagentTranscript(ctx context.Context, ev *Event) error {
	if ev.AgentID == "" || ev.TranscriptPath == "" {
		return nil
	}
	if !agentPat.MatchString(ev.AgentID) || !agentPat.MatchString(strings.ReplaceAll(ev.SessionID, ".", "_")) {
		return fmt.Errorf("%w: agent_id %.64q of session %.64q names no transcript the hook can read", ErrEvent, ev.AgentID, ev.SessionID)
	}
	sub := *ev
	sub.TranscriptPath = filepath.Join(filepath.Dir(ev.TranscriptPath), ev.SessionID, "subagents", "agent-"+ev.AgentID+".jsonl")
	_, err := h.readTranscript(ctx, &sub, time.Time{})
	return err
}

// ErrForkUnread: a session that started from an earlier conversation
// proposed a call before its transcript showed that conversation whole.
var ErrForkUnread = errors.New("the conversation this session inherited is not in its transcript yet")

// readTranscript reads what the event's transcript gained and records it.
// For a session marked as inheriting (since is its start), ended says the
// read reached the end of the inherited conversation.
func (h *Handler) readTranscript(ctx context.Context, ev *Event, since time.Time) (ended bool, err error) {
	agent, err := h.signer(ctx, h.m.Agent)
	if err != nil {
		return false, err
	}
	st := h.state.loadRead(ev.SessionID, ev.TranscriptPath, agent.Public())
	f, err := os.Open(ev.TranscriptPath)
	if errors.Is(err, os.ErrNotExist) && st.Offset == 0 {
		// Claude Code has not written it yet (the start of a session): the
		// events are all there is to go on.
		return false, nil
	}
	if err != nil {
		return false, h.incomplete(ev, fmt.Sprintf("its transcript %s, read up to byte %d, cannot be read: %v", clip(ev.TranscriptPath), st.Offset, err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	if !fi.Mode().IsRegular() {
		return false, h.incomplete(ev, fmt.Sprintf("its transcript %s is not a regular file", clip(ev.TranscriptPath)))
	}
	if fi.Size() < st.Offset {
		return false, h.incomplete(ev, fmt.Sprintf("its transcript %s shrank from %d to %d bytes", clip(ev.TranscriptPath), st.Offset, fi.Size()))
	}
	if st.Offset > 0 {
		if tail, err := tailDigest(f, st.Offset); err != nil || tail != st.Tail {
			// Edited before the offset: read it all again; what is new is
			// recorded as content the hook has not seen.
			st = &readState{Session: ev.SessionID, Path: ev.TranscriptPath}
		}
	}
	if _, err := f.Seek(st.Offset, io.SeekStart); err != nil {
		return false, err
	}
	if st.Tools == nil {
		st.Tools = map[string]string{}
	}
	sy := &syncer{h: h, ev: ev, st: st, continued: st.Offset > 0, inheriting: !since.IsZero()}
	r := bufio.NewReaderSize(f, 64<<10)
	off := st.Offset
	for {
		b, err := readLine(r)
		if err == io.EOF {
			break // a line without its newline is still being written: read next time
		}
		if err != nil {
			return false, fmt.Errorf("reading the transcript %s: %w", clip(ev.TranscriptPath), err)
		}
		var items []item
		if l := bytes.TrimSpace(b); len(l) > 0 {
			var written time.Time
			items, written = parseLine(l, st.Tools)
			if sy.inheriting && !written.IsZero() && !written.Before(since) {
				sy.ended = true
			}
		}
		for _, it := range items {
			if err := sy.record(ctx, it); err != nil {
				return false, err
			}
		}
		off += int64(len(b))
	}
	for len(st.Tools) > maxPendingTools {
		for id := range st.Tools {
			delete(st.Tools, id)
			break
		}
	}
	for len(st.Typed) > maxPendingTools {
		for id := range st.Typed {
			delete(st.Typed, id)
			break
		}
	}
	st.Offset = off
	if st.Tail, err = tailDigest(f, off); err != nil {
		return false, err
	}
	return sy.ended, h.state.putRead(st, agent)
}

// incomplete marks the session (its calls are denied from now on) and
// fails the event.
func (h *Handler) incomplete(ev *Event, why string) error {
	h.state.MarkUnrecorded(ev.SessionID, why)
	return fmt.Errorf("this session's context is incomplete: %s", why)
}

// readLine reads one line with its newline; io.EOF when no whole line is
// left.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxTranscriptLine {
			return nil, fmt.Errorf("a line longer than %d bytes", maxTranscriptLine)
		}
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			return nil, io.EOF
		default:
			return nil, err
		}
	}
}

func tailDigest(f *os.File, off int64) (string, error) {
	start := max(0, off-tailLen)
	b := make([]byte, off-start)
	if _, err := f.ReadAt(b, start); err != nil && !(err == io.EOF && len(b) == 0) {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// syncer records the items of one read.
type syncer struct {
	h  *Handler
	ev *Event
	st *readState
	// continued: this read goes on from where an earlier one stopped, so
	// the hook read what the transcript held before.
	continued bool
	recalled  map[string]bool
	// inheriting: the session is marked as starting from an earlier
	// conversation; ended, the read reached where that conversation ends.
	inheriting, ended bool
}

// record records one item unless the session's context holds it.
func (sy *syncer) record(ctx context.Context, it item) error {
	h := sy.h
	if it.from == fromTool && it.tool != "" && h.m.Output(it.tool).Skip {
		return nil // the tool's output echoes the agent's own arguments (TodoWrite)
	}
	if it.from == fromTool && it.toolUseID != "" && sy.gatewayRecorded(ctx, it) {
		return nil // the gateway recorded what it sent, in this session (one record)
	}
	// Recorded if any form is in this session (the event path's entry
	// usually is); else inherited if other sessions hold it.
	var elsewhere []string
	forms := append([][]byte{it.content}, it.alts...)
	if it.meta && !(sy.inheriting && !sy.ended) {
		// Text Claude Code wrote (a slash command's) is this turn's: the
		// same bytes recorded earlier, in this session or another (the
		// person's own command, their prompt), say nothing of who wrote
		// these, outside a conversation inherited.
		forms = nil
	}
	for _, c := range forms {
		// Whether the person's prompt ends an inherited conversation
		// depends on every session that holds the text.
		ends := sy.inheriting && !sy.ended && it.from == fromUser
		in, prompt, others, err := h.matches(ctx, lineage.DigestContent(c), sy.ev.SessionID, sy.recalled, ends)
		if err != nil {
			return err
		}
		if in {
			// The person's prompt in this session ends the inherited
			// conversation, unless that conversation may hold it too.
			sy.ended = sy.ended || ends && prompt && len(others) == 0
			if it.tag != nil && prompt && it.uuid != "" {
				if sy.st.Typed == nil {
					sy.st.Typed = map[string]string{}
				}
				sy.st.Typed[it.uuid] = it.tag.typed()
			}
			return nil // recorded in this session (so in its context), or recalled into it by this read
		}
		elsewhere = append(elsewhere, others[:min(len(others), maxRecall-len(elsewhere))]...)
	}
	if len(elsewhere) > 0 {
		// Inherited: the entries that hold this content, at their tiers.
		if err := h.b.Recall(ctx, sy.ev.SessionID, elsewhere); err != nil {
			return err
		}
		if sy.recalled == nil {
			sy.recalled = map[string]bool{}
		}
		for _, id := range elsewhere {
			sy.recalled[id] = true
		}
		return nil
	}
	if typed, ok := sy.st.Typed[it.parent]; ok && it.meta && it.parent != "" {
		delete(sy.st.Typed, it.parent)
		m := typedCommand.FindStringSubmatch(typed)
		tag := commandTag{m[1], m[2]}
		if owner, label := h.commandOwner(sy.ev.CWD, sy.ev.SessionID, tag, it.content); owner != "" {
			_, err := h.recordLabelled(ctx, owner, lineage.KindToolOutput, sy.ev.SessionID, it.content, []lineage.Parent{}, label+" (from the transcript)")
			return err
		}
	}
	principal, kind, parents, err := sy.principalOf(ctx, it)
	if err != nil {
		return err
	}
	_, err = h.recordLabelled(ctx, principal, kind, sy.ev.SessionID, it.content, parents, it.label+" (from the transcript)")
	return err
}

// principalOf is whom an item is recorded as (see the package's sync
// rules above), its kind, and its parents.
func (sy *syncer) principalOf(ctx context.Context, it item) (string, lineage.Kind, []lineage.Parent, error) {
	h := sy.h
	none := []lineage.Parent{}
	switch it.from {
	case fromTool:
		if it.tool != "" {
			return h.m.Output(it.tool).Principal, lineage.KindToolOutput, none, nil
		}
	case fromFile:
		if o := h.m.Output("Read"); !o.Skip {
			return o.Principal, lineage.KindToolOutput, none, nil
		}
	case fromMCP:
		if !h.m.MCP.Skip {
			return h.m.MCP.Principal, lineage.KindToolOutput, none, nil
		}
	case fromSummary:
		// The agent's summary of what the session held, when the hook
		// read what came before it in this transcript: it derives from
		// the whole context, with strong edges. A summary a transcript
		// starts with (a fork or a --continue of a compacted session, a
		// resume) summarises what the hook may not have seen.
		if sy.continued {
			ps, err := h.contextParents(ctx, sy.ev.SessionID)
			return h.m.Agent, lineage.KindSummary, ps, err
		}
	}
	p, err := h.unverified()
	return p, lineage.KindToolOutput, none, err
}

// unverified is the principal of content the hook cannot attribute: the
// default tool principal, or else one of the mapping's principals of tier
// unverified.
func (h *Handler) unverified() (string, error) {
	if !h.m.Default.Skip && h.m.Default.Principal != "" {
		return h.m.Default.Principal, nil
	}
	for _, id := range h.m.ids() {
		if h.m.Principals[id].Tier == registry.Unverified.String() {
			return id, nil
		}
	}
	return "", fmt.Errorf("%s names no unverified principal to record unattributed content as", MappingFile)
}

// The content index: for each content digest, the entries the hook
// recorded with it (hook-state/claude/digests). It only says where to
// look: every entry it names is read from the store, and counts only if
// its signature verifies and its signed content digest is the one looked
// up. A lost index makes inherited content unverified, never skipped.

func (s *State) digestPath(digest string) string {
	d := strings.TrimPrefix(digest, "sha256:")
	return filepath.Join(s.dir, "claude", "digests", d[:2], d)
}

func (s *State) addDigest(digest, id string) error {
	p := s.digestPath(digest)
	// Neither the folders nor the file may be links a writer of the
	// directory planted: the line is appended to the index, never
	// through it to a file elsewhere.
	base := filepath.Dir(s.dir) // the data directory, which exists
	rel, err := filepath.Rel(base, filepath.Dir(p))
	if err != nil {
		return err
	}
	if err := safefile.MkdirAll(base, rel, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(id + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// maxCandidates bounds the entries of one content read from the store:
// the newest, as the index lists them oldest first.
const maxCandidates = 4 * maxRecall

// matches looks up the stored entries whose signed content digest is
// digest, as far as the index knows them, newest first: in says one was
// recorded in session (or is in recalled), prompt that one such is the
// person's prompt (the user principal's, of kind prompt), and others are
// the other sessions' entries, listed only when none is in session, or
// when all asks for every one (the scan then goes on past an entry in
// session).
func (h *Handler) matches(ctx context.Context, digest, session string, recalled map[string]bool, all bool) (in, prompt bool, others []string, err error) {
	b, err := os.ReadFile(h.state.digestPath(digest))
	if errors.Is(err, os.ErrNotExist) {
		return false, false, nil, nil
	}
	if err != nil {
		return false, false, nil, err
	}
	ids := strings.Fields(string(b))
	seen := map[string]bool{}
	for i := len(ids) - 1; i >= 0 && len(seen) < maxCandidates; i-- {
		id := ids[i]
		if seen[id] || !lineage.IsID(id) {
			continue
		}
		seen[id] = true
		if recalled[id] {
			return true, false, nil, nil
		}
		v, err := h.b.Show(ctx, id)
		if err != nil || v.SignatureError != "" || v.Node == nil || v.Node.ID != id {
			continue
		}
		st, _, _, err := lineage.Open(v.Envelope)
		if err != nil || st.ContentDigest != digest {
			continue
		}
		if st.Session != session {
			others = append(others, id)
			continue
		}
		in, prompt = true, prompt || st.Kind == lineage.KindPrompt && st.Principal == h.m.User
		if !all {
			return true, prompt, nil, nil
		}
	}
	if in && !all {
		others = nil
	}
	return in, prompt, others, nil
}

// indexing is the handler's backend: every entry the hook records is added
// to the content index.
type indexing struct {
	pedigree.Harness
	state *State
}

func (x indexing) Record(ctx context.Context, s *registry.Signer, en pedigree.Entry) (*lineage.Node, error) {
	n, err := x.Harness.Record(ctx, s, en)
	if err != nil {
		return nil, err
	}
	if en.Kind == lineage.KindPrompt || en.Kind == lineage.KindToolOutput || en.Kind == lineage.KindSummary {
		if err := x.state.addDigest(lineage.DigestContent(en.Content), n.ID); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// gatewayRecorded says whether a tool result the transcript holds is one
// the MCP gateway recorded in this session: a tool of the gateway's, whose
// PostToolUse found the gateway's output (hook.go, gatewayOutput), and
// that output is a tool_output entry of this session signed by a principal
// other than the hook's own MCP principal. The gateway records everything
// it sends toward the host (its choke point), in whatever form it sent it;
// the transcript shows Claude Code's rendering of it, whose bytes differ.
// The per-tool-use state only names the entry: the entry itself is checked.
func (sy *syncer) gatewayRecorded(ctx context.Context, it item) bool {
	h := sy.h
	if _, ok := h.m.gatewayTool(it.tool); !ok {
		return false
	}
	u, err := h.state.Get(sy.ev.SessionID, it.toolUseID)
	if err != nil || u == nil || u.Output == "" || u.Tool != it.tool {
		return false
	}
	v, err := h.b.Show(ctx, u.Output)
	if err != nil || v.SignatureError != "" || v.Node == nil {
		return false
	}
	n := v.Node
	if n.Session != sy.ev.SessionID || n.Kind != lineage.KindToolOutput || n.Principal == h.m.MCP.Principal {
		return false
	}
	// An output of this very tool use: recorded after the hook's own
	// check of it (the logged decision, not the state, says when), so a
	// state naming an older output of the session skips nothing.
	d, err := h.b.Decision(ctx, u.DecisionID)
	if err != nil || d.Session != sy.ev.SessionID || d.Tool != it.tool || d.Principal != h.m.Agent {
		return false
	}
	checked, err1 := time.Parse(time.RFC3339Nano, d.Time)
	at, err2 := time.Parse(time.RFC3339Nano, n.Time)
	return err1 == nil && err2 == nil && !at.Before(checked)
}
