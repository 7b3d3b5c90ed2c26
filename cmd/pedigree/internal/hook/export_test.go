package hook

import "time"

// SetForkWait bounds how long a PreToolUse waits for an inheriting
// session's transcript (sync.go), for tests.
func (h *Handler) SetForkWait(d time.Duration) { h.forkWait = d }

// SetNow sets the clock a SessionStart marks its session by, for tests.
func (h *Handler) SetNow(now func() time.Time) { h.now = now }
