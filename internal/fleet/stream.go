package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Kind is what a record is; it is the second token of its subject.
type Kind string

// The kinds of record on the stream.
const (
	Genesis   Kind = "genesis"   // the frozen registry: the stream's first record
	Entry     Kind = "entry"     // a signed entry (key: its ID)
	Approval  Kind = "approval"  // a signed approval entry (key: its ID)
	Rejection Kind = "rejection" // a signed rejection entry (key: its ID)
	Decision  Kind = "decision"  // a decision that used no approval (key: its ID)
	Use       Kind = "use"       // a decision that used an approval (key: the approval's ID)
	Recall    Kind = "recall"    // a recall record (key: its ID)
	// Checkpoint is a node's signed checkpoint of the stream's chain (key:
	// the sequence it covers).
	Checkpoint Kind = "checkpoint"
)

func (k Kind) valid() bool {
	switch k {
	case Genesis, Entry, Approval, Rejection, Decision, Use, Recall, Checkpoint:
		return true
	}
	return false
}

// Defaults.
const (
	DefaultStream   = "PEDIGREE"
	DefaultPrefix   = "pedigree"
	DefaultReplicas = 3
	// DefaultWait bounds how long a write waits for this node to apply it,
	// and a check for the entries it names.
	DefaultWait = 5 * time.Second
	// DefaultMaxLag is the lag (records) above which /readyz fails.
	DefaultMaxLag = 1000
	// MaxRecordBytes bounds one record: an entry's envelope and content, or
	// a decision with its input and call entry, fit well below it.
	MaxRecordBytes = 4 << 20
	// dedupWindow is how long the stream remembers message IDs. Beyond it
	// the per-subject create-only checks still refuse a second copy.
	dedupWindow = 10 * time.Minute
	// maxSquatters bounds how many refused records a create-only publish
	// steps over on its subject before it gives up (a conflict: a deny).
	maxSquatters = 64
)

// subject is the record's subject: prefix.kind.key.
func subject(prefix string, k Kind, key string) string {
	return prefix + "." + string(k) + "." + key
}

// parseSubject splits a subject into its kind and key.
func parseSubject(prefix, s string) (Kind, string, error) {
	rest, ok := strings.CutPrefix(s, prefix+".")
	if !ok {
		return "", "", fmt.Errorf("subject %q is not under %s", s, prefix)
	}
	k, key, _ := strings.Cut(rest, ".")
	if !Kind(k).valid() || strings.Contains(key, ".") {
		return "", "", fmt.Errorf("subject %q names no kind of record", s)
	}
	return Kind(k), key, nil
}

// streamConfig is the stream every node of a fleet agrees on. Replicated
// to Replicas servers with a file store: an acknowledged publish is on a
// quorum (2 of 3). Whether it is on their disks too is the servers' sync
// setting (see doc.go and Embedded).
func streamConfig(name, prefix string, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:       name,
		Subjects:   []string{prefix + ".>"},
		Storage:    jetstream.FileStorage,
		Replicas:   replicas,
		Retention:  jetstream.LimitsPolicy,
		Discard:    jetstream.DiscardNew,
		MaxMsgSize: MaxRecordBytes,
		Duplicates: dedupWindow,
		// The stream is the system of record: nothing is ever removed.
		DenyDelete: true,
		DenyPurge:  true,
	}
}

// ensureStream creates the stream, or checks that the one there keeps the
// promises this package makes.
func ensureStream(ctx context.Context, js jetstream.JetStream, name, prefix string, replicas int) (jetstream.Stream, error) {
	want := streamConfig(name, prefix, replicas)
	s, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, want)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s, err = js.Stream(ctx, name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("fleet stream %s: %w", name, err)
	}
	got := s.CachedInfo().Config
	switch {
	case got.Storage != jetstream.FileStorage:
		return nil, fmt.Errorf("fleet stream %s is not on a file store", name)
	case got.Replicas != replicas:
		return nil, fmt.Errorf("fleet stream %s has %d replicas, this node expects %d", name, got.Replicas, replicas)
	case !got.DenyDelete || !got.DenyPurge:
		return nil, fmt.Errorf("fleet stream %s allows deleting records", name)
	case len(got.Subjects) != 1 || got.Subjects[0] != prefix+".>":
		return nil, fmt.Errorf("fleet stream %s holds subjects %v, not %s.>", name, got.Subjects, prefix)
	}
	return s, nil
}

// NodePermissions are the subjects a node's NATS user needs, and no more:
// it publishes records under prefix, reads the stream (its info, one
// record, an ordered pull consumer of its own) and may create it with the
// settings every node checks; it receives replies on its inbox. It cannot
// delete, purge or reconfigure the stream, delete a record, or touch
// another stream. Give every node such a user (docs/fleet.md has the same
// list as a nats-server configuration).
func NodePermissions(stream, prefix string) Permissions {
	if stream == "" {
		stream = DefaultStream
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	api := "$JS.API."
	return Permissions{
		Publish: []string{
			prefix + ".>",
			api + "STREAM.INFO." + stream,
			api + "STREAM.CREATE." + stream,
			api + "STREAM.MSG.GET." + stream,
			api + "CONSUMER.CREATE." + stream,
			api + "CONSUMER.CREATE." + stream + ".>",
			api + "CONSUMER.INFO." + stream + ".>",
			api + "CONSUMER.DELETE." + stream + ".>",
			api + "CONSUMER.MSG.NEXT." + stream + ".>",
		},
		Subscribe: []string{"_INBOX.>"},
	}
}
