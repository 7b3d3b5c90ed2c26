// Package decisionlog owns what the gate's decisions leave behind: the
// decision records and the exact policy input each was made on, the index
// of approvals by session and action with the use of each, and each
// session's trajectory (its features, calls and alerts). It keeps them in
// its own namespace of the store, through the kv contract, and writes only
// inside a transaction the engine assembles, because every decision is
// logged in the same commit.
//
// It is internal: the engine is its only user. Nothing here is evidence by
// itself. A decision record is hashed into its ID, which the Merkle log
// holds; an approval counts only after its signed entry verifies (the index
// here only finds candidates); a use is the logged decision that names the
// approval, found by the engine in the log's leaves (the au/ row is a hint
// that can only deny); a trajectory is re-derived from the logged decisions and recalls
// by verify.
package decisionlog
