package pedigree

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pedigree-ai/pedigree/internal/fleet"
	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/lineage"
	"github.com/pedigree-ai/pedigree/registry"
)

// FleetOptions say how a node joins a fleet (see internal/fleet's doc.go
// for what the fleet promises).
type FleetOptions struct {
	// NATS is the URL of the fleet's NATS servers (comma-separated).
	NATS string
	// TrustRoot is the operator public key the stream's genesis must be
	// frozen by (default: the key of WithTrustRoot). Required for a
	// directory made from the stream; a directory with a registry already
	// pins its own operator key when there is none.
	TrustRoot ed25519.PublicKey
	// Stream names the stream (default "PEDIGREE"); Replicas is its
	// replica count (default 3; 1 for a one-server trial).
	Stream   string
	Replicas int
	// Wait bounds a write's wait for this node to apply it and a check's
	// wait for the entries it names (default 5s).
	Wait time.Duration
	// MaxLag is the lag in records above which the node is not ready.
	MaxLag uint64
	// PinServers connects only to the servers in NATS, never to the
	// ones the cluster announces.
	PinServers bool
	// Name names the node in logs.
	Name string
	// NATSUser and NATSPassword, or NATSCreds (a NATS credentials file),
	// authenticate the node to the fleet's servers.
	NATSUser, NATSPassword string
	NATSCreds              string
	// NATSCA (PEM: the authorities the servers' certificates chain to)
	// makes the link TLS only; NATSCert and NATSKey are the node's client
	// certificate for servers that verify their clients.
	NATSCA, NATSCert, NATSKey string
}

// ErrFleet: the node cannot join the fleet as asked.
var ErrFleet = errors.New("fleet")

// fleetLink is a fleet node's engine and its link to the stream.
type fleetLink struct {
	e *Engine
	n *fleet.Node
	// mine are the records this node is publishing, by the SHA-256 of
	// their bytes on the wire: its applier takes their signature as made
	// (the same bytes for the same subject verify the same way).
	mine sync.Map // [32]byte → ownRecord
}

type ownRecord struct {
	kind fleet.Kind
	key  string
	rec  []byte
}

// JoinFleet opens (or makes, from the stream) the data directory dir as a
// node of the fleet: the node applies the fleet's stream into its store and
// publishes its writes to the stream. The stream's first record is the
// frozen registry: a directory without a store is made from it after
// checking it against o.TrustRoot; a directory with a frozen registry and
// no entries seeds an empty stream with it; a directory whose registry
// differs from the stream's is refused.
func JoinFleet(ctx context.Context, dir string, o FleetOptions, opts ...Option) (*Engine, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: a fleet node keeps a data directory", ErrFleet)
	}
	if o.TrustRoot == nil && c.trustRoot != nil {
		o.TrustRoot = c.trustRoot.Key
	}
	n, err := fleet.Connect(ctx, fleet.Config{URL: o.NATS, Stream: o.Stream, Replicas: o.Replicas, Wait: o.Wait,
		MaxLag: o.MaxLag, PinServers: o.PinServers, Name: o.Name, Log: c.log, User: o.NATSUser, Password: o.NATSPassword, Creds: o.NATSCreds,
		CA: o.NATSCA, Cert: o.NATSCert, Key: o.NATSKey})
	if err != nil {
		return nil, err
	}
	e, err := joinFleet(ctx, n, dir, o, c)
	if err != nil {
		n.Close()
		return nil, err
	}
	return e, nil
}

func joinFleet(ctx context.Context, n *fleet.Node, dir string, o FleetOptions, c config) (*Engine, error) {
	gen, err := n.Genesis(ctx)
	if err != nil && !errors.Is(err, fleet.ErrNoGenesis) {
		return nil, err
	}
	var db *store.DB
	if _, serr := os.Stat(filepath.Join(dir, "db")); serr == nil {
		if db, err = store.Open(dir, store.Options{NoSync: c.noSync}); err != nil {
			return nil, err
		}
	} else {
		if gen == nil {
			return nil, fmt.Errorf("%w: %w: seed it by serving a frozen data directory first", ErrFleet, fleet.ErrNoGenesis)
		}
		if err := registry.CheckGenesis(gen, o.TrustRoot); err != nil {
			return nil, err
		}
		if db, err = store.Create(dir, store.Options{NoSync: c.noSync}); err != nil {
			return nil, err
		}
		if err := registry.Install(ctx, db.Space(store.Registry), gen, o.TrustRoot); err != nil {
			db.Close()
			return nil, err
		}
	}
	c.fleetNode = true
	e, err := open(ctx, db, dir, c)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Engine, error) { e.Close(); return nil, err }
	if e.engine == nil {
		// Its peers would refuse whatever it published (and it seeds
		// nothing).
		return fail(fmt.Errorf("%w: %w: %w (register this node's engine key as a principal engine:<node>, tier external, "+
			"in the seed directory before it is frozen)", ErrFleet, ErrUncertifiedEngine, e.engineErr))
	}
	mine, err := e.reg.Genesis()
	if err != nil {
		return fail(fmt.Errorf("%w: %w", ErrFleet, err))
	}
	pin := o.TrustRoot
	if pin == nil {
		pin = e.reg.OperatorKey()
	}
	applied, err := e.fleetApplied()
	if err != nil {
		return fail(err)
	}
	if gen == nil {
		if applied > 0 {
			return fail(fmt.Errorf("%w: this directory applied %d records of a stream that is now empty", ErrFleet, applied))
		}
		if k, err := e.graph.Count(1); err != nil || k > 0 {
			return fail(errors.Join(err, fmt.Errorf("%w: the stream is empty and this directory holds entries: a fleet starts from a frozen registry and no entries", ErrFleet)))
		}
		if err := n.Seed(ctx, mine); err != nil {
			return fail(err)
		}
		if gen, err = n.Genesis(ctx); err != nil {
			return fail(err)
		}
	}
	if err := registry.CheckGenesis(gen, pin); err != nil {
		return fail(err)
	}
	if string(gen) != string(mine) {
		return fail(fmt.Errorf("%w: this directory's registry differs from the fleet's genesis", ErrFleet))
	}
	if applied == 0 {
		if k, err := e.graph.Count(1); err != nil || k > 0 {
			return fail(errors.Join(err, fmt.Errorf("%w: this directory holds entries that are not from the fleet's stream", ErrFleet)))
		}
	}
	if err := e.writeFreezeCopy(); err != nil {
		return fail(err)
	}
	e.fleet = &fleetLink{e: e, n: n}
	if err := n.Start(e.fleet); err != nil {
		e.fleet = nil
		return fail(err)
	}
	return e, nil
}

// writeFreezeCopy keeps the freeze record beside the store (a directory
// made from the stream has none yet).
func (e *Engine) writeFreezeCopy() error {
	rec, err := e.reg.FreezeRecord()
	if err != nil || rec == nil {
		return err
	}
	if safefile.Exists(e.dir, FreezeFile) {
		return nil
	}
	return safefile.WriteFile(e.dir, FreezeFile, rec, 0o444)
}

var keyApplied = []byte("applied")

// fleetApplied is the stream sequence of the last record this directory
// applied (0: none).
func (e *Engine) fleetApplied() (uint64, error) {
	var seq uint64
	err := e.db.View(func(t *store.Txn) error {
		b, err := t.In(store.Fleet).Get(keyApplied)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(b) != 8 {
			return fmt.Errorf("the fleet cursor is %d bytes", len(b))
		}
		seq = binary.BigEndian.Uint64(b)
		return nil
	})
	return seq, err
}

func setApplied(t *store.Txn, seq uint64) error {
	return t.In(store.Fleet).Set(keyApplied, binary.BigEndian.AppendUint64(nil, seq))
}

// Applied implements fleet.Applier.
func (l *fleetLink) Applied() (uint64, error) { return l.e.fleetApplied() }

// Apply implements fleet.Applier: the record is decoded and verified,
// then applied in one commit with the node's place in the stream. A record
// that does not verify, or that apply refuses the same way on every node,
// is refused: only the place is stored.
func (l *fleetLink) Apply(ctx context.Context, seq uint64, kind fleet.Kind, key string, data []byte) error {
	e := l.e
	rec, err := l.open(kind, key, data)
	var r *record
	if err == nil {
		r, err = e.decode(ctx, kind, key, rec)
	}
	if err == nil {
		err = e.db.Commit(ctx, r.size()+16, func(t *store.Txn) error {
			if err := e.apply(t, r); err != nil {
				return err
			}
			return setApplied(t, seq)
		})
		if err == nil {
			r.committed()
			return nil
		}
		if !refusal(err) {
			return err
		}
	} else if ctx.Err() != nil {
		return ctx.Err()
	}
	if cerr := e.db.Commit(ctx, 16, func(t *store.Txn) error { return setApplied(t, seq) }); cerr != nil {
		return cerr
	}
	return fmt.Errorf("%w: %s record %d: %w", fleet.ErrRefused, kind, seq, err)
}

// open checks a record's engine signature (not again for a record this
// node is publishing) and returns the record it signs.
func (l *fleetLink) open(kind fleet.Kind, key string, data []byte) ([]byte, error) {
	if v, ok := l.mine.Load(sha256.Sum256(data)); ok {
		if o := v.(ownRecord); o.kind == kind && o.key == key {
			return o.rec, nil
		}
	}
	rec, _, err := l.e.openRecord(kind, key, data)
	return rec, err
}

// commit publishes r and waits until this node has applied it.
func (l *fleetLink) commit(ctx context.Context, r *record) error {
	m, err := r.encode()
	if err != nil {
		return err
	}
	rec := m.data
	if m.data, err = l.e.sealRecord(m.kind, m.key, rec); err != nil {
		return err
	}
	sum := sha256.Sum256(m.data)
	l.mine.Store(sum, ownRecord{kind: m.kind, key: m.key, rec: rec})
	defer l.mine.Delete(sum)
	_, err = l.n.Publish(ctx, m.kind, m.key, m.id, m.data, m.createOnly)
	// A use of an approval that another decision used first earlier in
	// the stream comes back refused as decisionlog.ErrApprovalUsed: this
	// node has applied that use, so the check decides again without it.
	switch {
	case errors.Is(err, fleet.ErrConflict):
		// The entry is in the stream already.
	case err != nil:
		return err
	}
	if r.entry != nil && r.kind != recDecision {
		n, err := l.e.graph.Node(r.entry.Node.ID)
		if err != nil {
			return err
		}
		r.existing = n
	}
	return nil
}

// prepare runs a graph's Prepare; on a fleet node, an entry that names a
// parent this node has not applied waits (bounded) for the node to apply
// what the stream holds, then tries once more. What is still unknown is
// refused as unknown, saying that this node waited.
func (e *Engine) prepare(ctx context.Context, fn func() (*lineage.Pending, error)) (*lineage.Pending, error) {
	p, err := fn()
	if e.fleet == nil || !errors.Is(err, lineage.ErrUnknownParent) {
		return p, err
	}
	if werr := e.fleet.n.Barrier(ctx); werr != nil {
		return nil, fmt.Errorf("%w (this fleet node has not applied it: %v)", err, werr)
	}
	p, err = fn()
	if errors.Is(err, lineage.ErrUnknownParent) {
		s := e.fleet.n.Status()
		return nil, fmt.Errorf("%w (not in the fleet's stream: this node has applied all %d records)", err, s.Applied)
	}
	return p, err
}

// FleetStatus is a fleet node's place in the fleet's stream.
type FleetStatus struct {
	Applied   uint64 `json:"applied"`
	Last      uint64 `json:"last"`
	Lag       uint64 `json:"lag"`
	Connected bool   `json:"connected"`
	Applies   uint64 `json:"applies"`
	Refused   uint64 `json:"refused"`
	Ready     bool   `json:"ready"`
	Why       string `json:"why,omitempty"`
	Err       string `json:"error,omitempty"`
}

// fleetStatus is this node's place in the fleet's stream; false on an
// engine that is not a fleet node.
func (e *Engine) fleetStatus() (FleetStatus, bool) {
	if e.fleet == nil {
		return FleetStatus{}, false
	}
	s := e.fleet.n.Status()
	ready, why := e.fleet.n.Ready()
	return FleetStatus{Applied: s.Applied, Last: s.Last, Lag: s.Lag(), Connected: s.Connected, Applies: s.Applies,
		Refused: s.Refused, Ready: ready, Why: why, Err: s.Err}, true
}

// FleetRefusal is a record on the stream this node refused.
type FleetRefusal struct {
	Seq     uint64 `json:"seq"`
	Subject string `json:"subject"`
	Reason  string `json:"reason"`
}

// fleetRefusals are the records this node refused (the latest 1000).
func (e *Engine) fleetRefusals() []FleetRefusal {
	if e.fleet == nil {
		return nil
	}
	var out []FleetRefusal
	for _, r := range e.fleet.n.Refusals() {
		out = append(out, FleetRefusal{Seq: r.Seq, Subject: r.Subject, Reason: r.Reason})
	}
	return out
}

// fleetSync waits, bounded, until this node has applied every record the
// fleet's stream held when it was called.
func (e *Engine) fleetSync(ctx context.Context) error {
	if e.fleet == nil {
		return nil
	}
	return e.fleet.n.Barrier(ctx)
}

// genesis is the frozen registry as the record that starts a fleet's
// stream.
func (e *Engine) genesis() ([]byte, error) { return e.reg.Genesis() }
