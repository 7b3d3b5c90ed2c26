package fleet

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

var (
	// ErrRefused: a record on the stream was refused by this node's
	// applier (not a valid signed entry, a child before its parent, a
	// second use of an approval...). It is reported and never applied.
	ErrRefused = errors.New("record refused")
	// ErrConflict: a create-only publish found its subject taken: the
	// entry is in the stream already, or another node used the approval.
	ErrConflict = errors.New("the record's subject is taken")
	// ErrLagging: this node has not applied the stream that far within
	// the bound (it is behind, or cut off from the cluster).
	ErrLagging = errors.New("this fleet node has not applied the stream that far")
	// ErrNoRecord: the stream holds no record at that sequence.
	ErrNoRecord = errors.New("the fleet's stream holds no such record")
	// ErrNoGenesis: the stream holds no genesis yet.
	ErrNoGenesis = errors.New("the fleet's stream holds no registry genesis yet")
)

// Config configures a node's link to the fleet.
type Config struct {
	// URL is the NATS server (or comma-separated servers) to connect to.
	URL string
	// Stream and Prefix name the stream and its subjects (defaults
	// DefaultStream, DefaultPrefix).
	Stream, Prefix string
	// Replicas of the stream (default DefaultReplicas; 1 for a one-server
	// trial).
	Replicas int
	// Wait bounds a write's wait for this node to apply it, and a check's
	// wait for entries it names (default DefaultWait).
	Wait time.Duration
	// MaxLag is the lag above which the node reports itself not ready
	// (default DefaultMaxLag).
	MaxLag uint64
	// PinServers connects only to the servers in URL, never to the ones
	// the cluster announces (a node that must use its local server).
	PinServers bool
	// Name names the node in the server's client list and the logs.
	Name string
	Log  *slog.Logger
	// User and Password, or Creds (a NATS credentials file: a JWT and
	// its nkey seed), authenticate the node to its servers.
	User, Password string
	Creds          string
	// CA is a PEM file of the certificate authorities the servers'
	// certificates must chain to (TLS; without it, the system's). Cert and
	// Key are the node's client certificate and key, for servers that
	// verify their clients.
	CA, Cert, Key string
}

func (c *Config) defaults() error {
	if c.URL == "" {
		return errors.New("fleet: no NATS URL")
	}
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Replicas == 0 {
		c.Replicas = DefaultReplicas
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		return fmt.Errorf("fleet: %d replicas (1 to 5)", c.Replicas)
	}
	if c.Wait <= 0 {
		c.Wait = DefaultWait
	}
	if c.MaxLag == 0 {
		c.MaxLag = DefaultMaxLag
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Applier is what a node materialises the stream into: the engine over
// the node's local store.
type Applier interface {
	// Applied is the stream sequence of the last record applied and the
	// stream's chain there, as stored (1 and the genesis's chain when
	// nothing was applied yet).
	Applied() (uint64, Chain, error)
	// Apply verifies and applies the record at seq, in stream order, and
	// stores seq as applied, with chain (the stream's chain up to and
	// including this record), in the same commit. A record it refuses it
	// does not apply, but it still stores seq and chain and returns an
	// error wrapping ErrRefused. An error wrapping ErrRewritten stops the
	// applier for good (the stream is not the one this node read); any
	// other error means nothing was stored and the node will offer the
	// record again.
	Apply(ctx context.Context, seq uint64, kind Kind, key string, data []byte, chain Chain) error
}

// Refusal is a record this node refused.
type Refusal struct {
	Seq     uint64
	Subject string
	Reason  string
}

// Status is a node's place in the stream.
type Status struct {
	Applied   uint64 // the last record applied (or refused)
	Last      uint64 // the last record this node knows the stream holds
	Connected bool
	Applies   uint64 // records applied since start
	Refused   uint64 // records refused since start
	Err       string // the applier's last error, "" when it runs
	Halted    string // why the applier stopped for good (the stream was rewritten), "" when it runs
}

// Lag is how many records the node is behind the stream, as far as it knows.
func (s Status) Lag() uint64 {
	if s.Last > s.Applied {
		return s.Last - s.Applied
	}
	return 0
}

// Node is one pedigree node's link to the fleet's stream: it publishes this
// node's records and runs the applier that materialises every record, in
// stream order, into the node's store.
type Node struct {
	cfg    Config
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream

	mu      sync.Mutex
	applied uint64
	chain   Chain // the stream's chain at applied
	// lastRec is the digest of the record at applied (its subject and
	// data), so that a barrier can see the stream still holds it there;
	// unknown (zero) after a restart until the next record is applied.
	lastRec [sha256.Size]byte
	// anchor is the place and digest of the last checkpoint record this
	// node verified: a stream made again with the record at applied kept
	// but records before it changed must still hold it there, or a node
	// reading the new stream from the start would find it and stop.
	anchor    uint64
	anchorRec [sha256.Size]byte
	halted    error // why the applier stopped for good (ErrRewritten)
	last      uint64
	advanced  chan struct{} // closed and replaced when applied moves
	refused   map[uint64]error
	reports   []Refusal
	err       error

	applies, refusals atomic.Uint64

	stop context.CancelFunc
	done chan struct{}
}

// Connect connects to the fleet's NATS servers and makes sure the stream
// exists with the settings the fleet relies on.
func Connect(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	opts := []nats.Option{nats.Name("pedigree " + cfg.Name), nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond), nats.RetryOnFailedConnect(false)}
	if cfg.PinServers {
		opts = append(opts, nats.IgnoreDiscoveredServers())
	}
	if cfg.User != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.Creds != "" {
		opts = append(opts, nats.UserCredentials(cfg.Creds))
	}
	if (cfg.Cert == "") != (cfg.Key == "") {
		return nil, errors.New("fleet: a client certificate and its key go together")
	}
	if cfg.CA != "" {
		opts = append(opts, nats.RootCAs(cfg.CA))
	}
	if cfg.Cert != "" {
		opts = append(opts, nats.ClientCert(cfg.Cert, cfg.Key))
	}
	if cfg.CA != "" || cfg.Cert != "" {
		// Never fall back to plain text.
		opts = append(opts, nats.Secure())
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("fleet: connect to %s: %w", cfg.URL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	s, err := ensureStream(ctx, js, cfg.Stream, cfg.Prefix, cfg.Replicas)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &Node{cfg: cfg, nc: nc, js: js, stream: s, advanced: make(chan struct{}), refused: map[uint64]error{}}, nil
}

// Genesis is the stream's first record, the frozen registry (ErrNoGenesis
// when the stream is empty).
func (n *Node) Genesis(ctx context.Context) ([]byte, error) {
	m, err := n.stream.GetMsg(ctx, 1)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, ErrNoGenesis
	}
	if err != nil {
		return nil, fmt.Errorf("fleet: read the genesis: %w", err)
	}
	if m.Subject != subject(n.cfg.Prefix, Genesis, "registry") {
		return nil, fmt.Errorf("fleet: the stream's first record is %s, not the registry genesis", m.Subject)
	}
	return m.Data, nil
}

// Seed publishes the genesis as the stream's first record, unless the
// stream holds a record already (then it does nothing: read Genesis).
func (n *Node) Seed(ctx context.Context, genesis []byte) error {
	_, err := n.js.Publish(ctx, subject(n.cfg.Prefix, Genesis, "registry"), genesis,
		jetstream.WithExpectStream(n.cfg.Stream), jetstream.WithExpectLastSequence(0), jetstream.WithMsgID("genesis"))
	if err != nil && !isWrongLastSequence(err) {
		return fmt.Errorf("fleet: seed the genesis: %w", err)
	}
	return nil
}

// Start runs the applier from the record after the last one a applied.
func (n *Node) Start(a Applier) error {
	seq, chain, err := a.Applied()
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.applied = max(seq, 1) // the genesis was checked before the node started
	n.chain = chain
	n.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	n.stop, n.done = cancel, make(chan struct{})
	go n.run(ctx, a)
	return nil
}

// Close stops the applier and closes the connection.
func (n *Node) Close() {
	if n.stop != nil {
		n.stop()
		<-n.done
	}
	n.nc.Close()
}

func (n *Node) run(ctx context.Context, a Applier) {
	defer close(n.done)
	for ctx.Err() == nil {
		err := n.consume(ctx, a)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, ErrRewritten) {
			n.halt(err)
			return
		}
		n.mu.Lock()
		n.err = err
		n.mu.Unlock()
		n.cfg.Log.Warn("fleet applier restarts", "node", n.cfg.Name, "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// consume applies the stream in order from the record after the last one
// applied, until an error (then run starts it again from where it stopped).
func (n *Node) consume(ctx context.Context, a Applier) error {
	n.mu.Lock()
	from := n.applied + 1
	n.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, n.cfg.Wait)
	cons, err := n.js.OrderedConsumer(cctx, n.cfg.Stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
	cancel()
	if err != nil {
		return err
	}
	// Messages come through a channel, so that a consumer that is stuck
	// can be left at once (stopping one can take a while).
	msgs := make(chan jetstream.Msg, 256)
	left := make(chan struct{})
	defer close(left)
	// Short pulls with heartbeats: a consumer lost with its server is
	// noticed, and the ordered consumer recreated, within about a second.
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case msgs <- m:
		case <-left:
		}
	}, jetstream.PullMaxMessages(256), jetstream.PullExpiry(2*time.Second), jetstream.PullHeartbeat(500*time.Millisecond))
	if err != nil {
		return err
	}
	defer func() { go cc.Stop() }()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var before uint64
	stalls := 0
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-cc.Closed():
			return errors.New("the consumer closed")
		case <-tick.C:
			// When the node knows of records it has not applied and has
			// applied nothing for a second, the consumer is stuck (its
			// server went away unnoticed): start anew.
			n.mu.Lock()
			applied, last := n.applied, n.last
			n.mu.Unlock()
			if last > applied && applied == before {
				if stalls++; stalls >= 2 {
					return fmt.Errorf("stalled at %d of %d", applied, last)
				}
			} else {
				stalls = 0
			}
			before = applied
		case m := <-msgs:
			md, err := m.Metadata()
			if err != nil {
				return err
			}
			seq := md.Sequence.Stream
			n.saw(seq + md.NumPending)
			n.mu.Lock()
			applied := n.applied
			n.mu.Unlock()
			if seq <= applied {
				continue
			}
			if seq != applied+1 {
				return fmt.Errorf("the stream skipped from %d to %d", applied, seq)
			}
			if err := n.Halted(); err != nil {
				return err // found by a barrier or a readiness check
			}
			n.mu.Lock()
			n.err = nil
			n.mu.Unlock()
			if err := n.applyOne(ctx, a, seq, m.Subject(), m.Data()); err != nil {
				return err
			}
		}
	}
}

func (n *Node) applyOne(ctx context.Context, a Applier, seq uint64, subj string, data []byte) error {
	kind, key, err := parseSubject(n.cfg.Prefix, subj)
	if err == nil && kind == Genesis {
		err = errors.New("a second genesis")
	}
	if err != nil {
		// Offered to the applier anyway, so that it stores its place.
		kind, key = "", ""
	}
	n.mu.Lock()
	chain := n.chain.Next(seq, subj, data)
	n.mu.Unlock()
	aerr := a.Apply(ctx, seq, kind, key, data, chain)
	if aerr != nil && !errors.Is(aerr, ErrRefused) {
		return aerr
	}
	n.mu.Lock()
	n.applied, n.chain, n.lastRec = seq, chain, recordDigest(subj, data)
	if kind == Checkpoint && aerr == nil {
		n.anchor, n.anchorRec = seq, n.lastRec
	}
	if aerr != nil {
		n.refused[seq] = aerr
		n.reports = append(n.reports, Refusal{Seq: seq, Subject: subj, Reason: aerr.Error()})
		if len(n.reports) > 1000 {
			delete(n.refused, n.reports[0].Seq)
			n.reports = n.reports[1:]
		}
	}
	close(n.advanced)
	n.advanced = make(chan struct{})
	n.mu.Unlock()
	if aerr != nil {
		n.refusals.Add(1)
		n.cfg.Log.Warn("fleet record refused", "node", n.cfg.Name, "seq", seq, "subject", subj, "error", aerr)
	} else {
		n.applies.Add(1)
	}
	return nil
}

func (n *Node) saw(last uint64) {
	n.mu.Lock()
	n.last = max(n.last, last)
	n.mu.Unlock()
}

// WaitApplied waits, bounded by the node's Wait, until this node has applied
// the record at seq; it returns the refusal when the node refused it.
func (n *Node) WaitApplied(ctx context.Context, seq uint64) error {
	t := time.NewTimer(n.cfg.Wait)
	defer t.Stop()
	for {
		n.mu.Lock()
		applied, ch, halted := n.applied, n.advanced, n.halted
		err := n.refused[seq]
		n.mu.Unlock()
		if applied >= seq {
			return err
		}
		if halted != nil {
			return halted
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return fmt.Errorf("%w: record %d, applied %d after %s", ErrLagging, seq, applied, n.cfg.Wait)
		}
	}
}

// Barrier waits, bounded, until this node has applied every record the
// stream held when it was called: what any node wrote before is then
// visible here. A node cut off from the cluster fails it.
func (n *Node) Barrier(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Wait)
	defer cancel()
	applied, _ := n.Head() // before the stream's state: it only grows
	info, err := n.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("%w: the stream cannot be reached: %v", ErrLagging, err)
	}
	if err := n.shorter(info.State.LastSeq, applied); err != nil {
		return err
	}
	if err := n.stillHolds(ctx); err != nil {
		return err
	}
	n.saw(info.State.LastSeq)
	if err := n.WaitApplied(ctx, info.State.LastSeq); err != nil && !errors.Is(err, ErrRefused) {
		return err
	}
	return nil
}

// Publish appends a record and waits, bounded, until this node has applied
// it (a node reads its own writes). id de-duplicates a publish retried
// within the stream's window; createOnly makes it a compare-and-set on its
// subject: it fails with ErrConflict (after this node has applied the
// record that holds the subject) when the subject holds a record already.
func (n *Node) Publish(ctx context.Context, kind Kind, key, id string, data []byte, createOnly bool) (uint64, error) {
	if !kind.valid() || kind == Genesis || key == "" {
		return 0, fmt.Errorf("fleet: cannot publish a %q record keyed %q", kind, key)
	}
	if len(data) > MaxRecordBytes {
		return 0, fmt.Errorf("fleet: a record of %d bytes (at most %d)", len(data), MaxRecordBytes)
	}
	subj := subject(n.cfg.Prefix, kind, key)
	id = string(kind) + ":" + id
	seq, dup, err := n.publish(ctx, subj, id, data, createOnly)
	if err != nil {
		return 0, err
	}
	err = n.WaitApplied(ctx, seq)
	if dup && errors.Is(err, ErrRefused) {
		// Someone published a record this node refused under this
		// record's message ID: publish again under a fresh one (the
		// applier stores an entry once, whatever its copies).
		if seq, _, err = n.publish(ctx, subj, id+":"+nuid.Next(), data, createOnly); err != nil {
			return 0, err
		}
		err = n.WaitApplied(ctx, seq)
	}
	return seq, err
}

// publish appends a record, retrying while the stream has no leader, and
// returns its sequence and whether the stream had it already (a duplicate
// message ID).
func (n *Node) publish(ctx context.Context, subj, id string, data []byte, createOnly bool) (uint64, bool, error) {
	opts := []jetstream.PublishOpt{jetstream.WithMsgID(id), jetstream.WithExpectStream(n.cfg.Stream),
		jetstream.WithRetryAttempts(20), jetstream.WithRetryWait(100 * time.Millisecond)}
	// A create-only publish expects its subject to hold nothing but records
	// every node refused (none at first): a record no node applied does
	// not take the subject, so junk published there by a writer that is
	// not a node (unsigned, see the engine's fleetsig.go) cannot squat it.
	var expect uint64
	squatters := 0
	pctx, cancel := context.WithTimeout(ctx, n.cfg.Wait)
	defer cancel()
	for {
		o := opts
		if createOnly {
			o = append(opts[:len(opts):len(opts)], jetstream.WithExpectLastSequencePerSubject(expect))
		}
		before, _ := n.Head()
		ack, err := n.js.Publish(pctx, subj, data, o...)
		switch {
		case err == nil:
			// A new record at a sequence this node had applied before it
			// published: the stream was deleted and made again since (a
			// duplicate's sequence is the original's, which may be
			// applied; the applier may apply this record, and more, before
			// the acknowledgement is read).
			if applied := before; !ack.Duplicate && ack.Sequence <= applied {
				err := fmt.Errorf("%w: this node's record was stored at %d, and it applied %d: the stream was deleted and made again", ErrRewritten, ack.Sequence, applied)
				n.halt(err)
				return 0, false, err
			}
			n.saw(ack.Sequence)
			return ack.Sequence, ack.Duplicate, nil
		case isWrongLastSequence(err):
			held, refused, err := n.conflict(ctx, pctx, subj)
			if !refused || squatters >= maxSquatters {
				return 0, false, err
			}
			// The subject's last record was refused (by this node, so by
			// every node): expect it, and publish again.
			expect = held
			squatters++
			continue
		case pctx.Err() != nil || !retryable(err):
			return 0, false, fmt.Errorf("fleet: publish %s: %w", subj, err)
		}
		// A leader election or a lost ack: the same message ID again is
		// stored at most once.
		select {
		case <-pctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// conflict is the error of a create-only publish whose subject is taken,
// returned once this node has applied the record that holds it (so that a
// check deciding again sees the approval used). The record may be a moment
// from readable: the stream refuses a second proposal on a subject before
// the first is stored.
//
// When this node refused the record that holds the subject, conflict
// returns its sequence and refused true (with the ErrConflict error, for a
// caller that will not publish again).
func (n *Node) conflict(ctx, pctx context.Context, subj string) (uint64, bool, error) {
	for {
		m, err := n.stream.GetLastMsgForSubject(pctx, subj)
		if err == nil {
			werr := n.WaitApplied(ctx, m.Sequence)
			if werr != nil && !errors.Is(werr, ErrRefused) {
				return 0, false, werr
			}
			return m.Sequence, werr != nil, fmt.Errorf("%w: %s holds record %d", ErrConflict, subj, m.Sequence)
		}
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, false, fmt.Errorf("%w: %s (and it cannot be read: %v)", ErrConflict, subj, err)
		}
		select {
		case <-pctx.Done():
			return 0, false, fmt.Errorf("%w: %s (its record was not stored within %s)", ErrConflict, subj, n.cfg.Wait)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func retryable(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// The server answered: a refusal, not a lost message. Only a
		// stream between leaders is worth asking again.
		return apiErr.Code == 503 || apiErr.ErrorCode == 10008 || apiErr.ErrorCode == 10009 // cluster not available, not leader
	}
	return true // no answer: timeout, no responders, reconnecting
}

func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Status is the node's place in the stream now.
func (n *Node) Status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := Status{Applied: n.applied, Last: n.last, Connected: n.nc.IsConnected(),
		Applies: n.applies.Load(), Refused: n.refusals.Load()}
	if n.err != nil {
		s.Err = n.err.Error()
	}
	if n.halted != nil {
		s.Halted, s.Err = n.halted.Error(), ""
	}
	return s
}

// Ready reports whether the node is connected, its applier runs, and its
// lag is at most MaxLag; when not, why.
func (n *Node) Ready() (bool, string) {
	s := n.Status()
	switch {
	case !s.Connected:
		return false, "not connected to the fleet's NATS servers"
	case s.Err != "":
		return false, "the applier stopped: " + s.Err
	case s.Halted != "":
		return false, s.Halted
	case s.Lag() > n.cfg.MaxLag:
		return false, fmt.Sprintf("lagging: %d records behind the stream (applied %d of %d)", s.Lag(), s.Applied, s.Last)
	}
	// A node whose stream was deleted (or that may no longer reach it)
	// cannot log anything: it is not ready, whatever it applied.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	applied, _ := n.Head()
	st, err := n.js.Stream(ctx, n.cfg.Stream)
	if err != nil {
		return false, "the fleet's stream cannot be reached: " + err.Error()
	}
	if err := n.shorter(st.CachedInfo().State.LastSeq, applied); err != nil {
		return false, err.Error()
	}
	if err := n.stillHolds(ctx); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// Refusals are the records this node refused (the latest 1000).
func (n *Node) Refusals() []Refusal {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Refusal(nil), n.reports...)
}

// halt stops the applier for good: the stream is not the one this node
// read. Waiters are woken to see why.
func (n *Node) halt(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.halted != nil {
		return
	}
	n.halted = err
	close(n.advanced)
	n.advanced = make(chan struct{})
	n.cfg.Log.Error("fleet applier stopped: the stream was rewritten", "node", n.cfg.Name, "error", err)
}

// Halted is why the applier stopped for good (nil while it runs).
func (n *Node) Halted() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.halted
}

// shorter halts the node when the stream holds fewer records (last, read
// after applied was) than it applied: the stream was deleted and made
// again.
func (n *Node) shorter(last, applied uint64) error {
	if err := n.Halted(); err != nil {
		return err
	}
	if last >= applied {
		return nil
	}
	err := fmt.Errorf("%w: the stream holds %d records, this node applied %d: it was deleted and made again, or cut", ErrRewritten, last, applied)
	n.halt(err)
	return err
}

// Anchor tells a node started again where the last checkpoint it verified
// is in the stream (its subject and data), for its barriers to check.
func (n *Node) Anchor(seq uint64, subject string, data []byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if seq > n.anchor {
		n.anchor, n.anchorRec = seq, recordDigest(subject, data)
	}
}

// Holds is the check a barrier makes, without waiting to apply: it halts
// the node (and returns ErrRewritten) when the stream is shorter than what
// it applied, or no longer holds the records it checks at their places. A
// stream that cannot be reached is not taken for a rewritten one.
func (n *Node) Holds(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Wait)
	defer cancel()
	applied, _ := n.Head()
	info, err := n.stream.Info(ctx)
	if err != nil {
		return n.Halted()
	}
	if err := n.shorter(info.State.LastSeq, applied); err != nil {
		return err
	}
	return n.stillHolds(ctx)
}

// stillHolds halts the node when the stream no longer holds, at the last
// sequence this node applied, the record it applied there, or, where the
// last checkpoint it verified was, that checkpoint: the stream was deleted
// and made again (perhaps as long as before, or longer, with records
// published since, or with the records before its last one changed). A
// stream that cannot be read there is not taken for a rewritten one: the
// caller's other checks decide.
func (n *Node) stillHolds(ctx context.Context) error {
	n.mu.Lock()
	applied, want, anchor, anchorRec, halted := n.applied, n.lastRec, n.anchor, n.anchorRec, n.halted
	n.mu.Unlock()
	if halted != nil {
		return halted
	}
	type place struct {
		seq  uint64
		want [sha256.Size]byte
		what string
	}
	places := []place{{applied, want, "the record this node applied there"}}
	if anchor != applied {
		places = append(places, place{anchor, anchorRec, "the last checkpoint this node verified"})
	}
	for _, at := range places {
		if at.seq <= 1 || at.want == ([sha256.Size]byte{}) {
			continue
		}
		m, err := n.stream.GetMsg(ctx, at.seq)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return nil
		case recordDigest(m.Subject, m.Data) == at.want:
			continue
		}
		err = fmt.Errorf("%w: the stream no longer holds, at %d, %s: it was deleted and made again", ErrRewritten, at.seq, at.what)
		n.halt(err)
		return err
	}
	return nil
}

// recordDigest names a record by its subject and data.
func recordDigest(subject string, data []byte) [sha256.Size]byte {
	d := sha256.Sum256(data)
	return sha256.Sum256(append([]byte(subject+"\x00"), d[:]...))
}

// Head is the last record this node applied and the stream's chain there.
func (n *Node) Head() (uint64, Chain) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.applied, n.chain
}

// LastSeq is the stream's last sequence as its servers report it now.
func (n *Node) LastSeq(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Wait)
	defer cancel()
	info, err := n.stream.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// Done is closed when the applier has stopped (the node closed, or its
// stream was rewritten).
func (n *Node) Done() <-chan struct{} { return n.done }

// Record reads the record at seq from the stream: its subject and bytes.
func (n *Node) Record(ctx context.Context, seq uint64) (string, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Wait)
	defer cancel()
	m, err := n.stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", nil, fmt.Errorf("%w: %d", ErrNoRecord, seq)
	}
	if err != nil {
		return "", nil, err
	}
	return m.Subject, m.Data, nil
}
