// Package trajectory reads the structure of a session's tool calls, never
// their content, and raises soft alerts.
//
// Calls are mapped to roles by the tool catalog (recall, list, save, draft,
// send, rag, other) and folded into a State whose features are updated in
// O(1) per call: counts per role, length, send without recall, recall before
// send (any recall before any send), the recall/send ratio, the longest run
// of recalls, five bigrams, the first role, and whether a send went to an
// external recipient or to one that descends from untrusted content.
//
// Invariant rules need no training; a logistic-regression Model can be
// trained on labelled sessions and loaded by the gate. Alerts are evidence:
// the default policy reports them as warnings and never denies on them
// alone. On benign traffic such detectors mostly reduce to "recall before
// send" (see the README's figures), which is why.
package trajectory
