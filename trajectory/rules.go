package trajectory

import "fmt"

// Alert is a soft alert: evidence for the gate and for people. The default
// policy never denies on an alert alone.
type Alert struct {
	Rule    string  `json:"rule"`
	Message string  `json:"message"`
	At      int     `json:"at"` // index of the call that raised it
	Score   float64 `json:"score,omitempty"`
}

// Rule names.
const (
	RuleRecallThenExternalSend = "recall-then-external-send"
	// RuleRecallThenSendUnknown is the bare structural invariant, any recall
	// before any send, for a send whose recipients are unknown (the harness
	// logged no arguments, or the catalog names no recipient_arg): the
	// detector must not fall silent exactly when it knows least.
	RuleRecallThenSendUnknown = "recall-then-send-unknown-recipient"
	RuleUntrustedRecipient    = "untrusted-recipient"
	RuleRecallBurstSend       = "recall-burst-send"
	RuleModel                 = "model"
)

// RecallBurst is the run of recalls that, followed by a send, raises an alert.
const RecallBurst = 3

// Rules are invariant detectors: no training, no threshold fitted to data.
// They look at the state after the call c was appended.
func Rules(s *State, c Call) []Alert {
	if c.Role != Send {
		return nil
	}
	at := s.Len - 1
	var out []Alert
	if c.RecipientUntrusted {
		out = append(out, Alert{Rule: RuleUntrustedRecipient, At: at,
			Message: fmt.Sprintf("%s sends to a recipient that descends from untrusted content", c.Tool)})
	}
	if s.RecallBeforeSnd && c.RecipientExternal {
		out = append(out, Alert{Rule: RuleRecallThenExternalSend, At: at,
			Message: fmt.Sprintf("recall before send to an external recipient (%s)", c.Tool)})
	}
	if s.RecallBeforeSnd && c.RecipientUnknown() {
		out = append(out, Alert{Rule: RuleRecallThenSendUnknown, At: at,
			Message: fmt.Sprintf("recall before send; the recipient was unknown, so only the structure was judged (%s)", c.Tool)})
	}
	if s.LongestRecall >= RecallBurst && c.RecipientExternal {
		out = append(out, Alert{Rule: RuleRecallBurstSend, At: at,
			Message: fmt.Sprintf("%d recalls in a row, then a send to an external recipient", s.LongestRecall)})
	}
	return out
}

// MaxKeptAlerts bounds the alerts a state keeps.
const MaxKeptAlerts = 1000

// Observe appends a call and returns the alerts it raises: the invariant
// rules, and the model when one is given.
func (s *State) Observe(c Call, m *Model) []Alert {
	s.Append(c)
	alerts := Rules(s, c)
	if m != nil {
		if score := m.Score(s.Features()); score >= m.Threshold {
			alerts = append(alerts, Alert{Rule: RuleModel, At: s.Len - 1, Score: score,
				Message: fmt.Sprintf("the trajectory model scores this session %.2f (threshold %.2f)", score, m.Threshold)})
		}
	}
	if room := MaxKeptAlerts - len(s.Alerts); room > 0 {
		s.Alerts = append(s.Alerts, alerts[:min(room, len(alerts))]...)
	}
	return alerts
}
