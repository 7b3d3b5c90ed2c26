package pedigree

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"
)

// TestRedTeamApprovalMatchLinear: a call that names its context by
// reference has every context entry as a parent, so a decision's
// justification, and the call an approval is matched against, are no
// longer bounded by MaxParents (1,024) but by the context (up to
// MaxContextRef). Matching an approval compared every ID of the one with
// every ID of the other: a session of 40,000 entries cost seconds of CPU
// per approval candidate, at every check of the same action in the
// session while the approval was unexpired, used or not.
func TestRedTeamApprovalMatchLinear(t *testing.T) {
	const n = 40000
	ids := make([]string, n)
	for i := range ids {
		s := sha256.Sum256(fmt.Append(nil, i))
		ids[i] = hex.EncodeToString(s[:])
	}
	call := append([]string{}, ids...)
	call[0], call[n-1] = call[n-1], call[0]
	start := time.Now()
	if !within(ids, call) {
		t.Fatal("a justification within the call's parents was not found within")
	}
	if within(append(ids[1:n/2:n/2], "x"), call) {
		t.Fatal("an ID the call does not hold was found within")
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Fatalf("matching a justification of %d entries took %s", n, took)
	}
}
