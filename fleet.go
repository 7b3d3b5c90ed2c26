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
	"time"

	"github.com/pedigree-ai/pedigree/internal/fleet"
	"github.com/pedigree-ai/pedigree/internal/safefile"
	"github.com/pedigree-ai/pedigree/internal/store"
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
	// Witness is a file outside the data directory where the node keeps
	// the latest fleet checkpoint it verified, and against which it holds
	// the stream: a stream cut back before it, or rewritten, is refused
	// (see fleetchain.go). Without it, a stream cut back to an earlier
	// checkpoint cannot be told from one that never went further.
	Witness string
	// Prefix is the stream's subject prefix (default "pedigree"); two
	// fleets on the same servers need two.
	Prefix string
}

// ErrFleetRewritten: the fleet's stream is not the one this node read, or
// it ends before what the node's witness saw (see fleetchain.go): the node
// stops applying and writes nothing.
var ErrFleetRewritten = fleet.ErrRewritten

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
	n, err := fleet.Connect(ctx, fleet.Config{URL: o.NATS, Stream: o.Stream, Prefix: o.Prefix, Replicas: o.Replicas, Wait: o.Wait,
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
	l := &fleetLink{e: e, n: n}
	l.genesis, l.witnessFile = fleet.GenesisChain(gen), o.Witness
	if err := l.holdToStream(ctx); err != nil {
		return fail(err)
	}
	if o.Witness != "" {
		if err := witnessOutside(e.dir, o.Witness); err != nil {
			return fail(fmt.Errorf("%w: %v", ErrFleet, err))
		}
		if err := l.readFleetWitness(o.Witness); err != nil {
			return fail(err)
		}
		if err := l.holdToWitness(ctx); err != nil {
			return fail(err)
		}
	}
	e.fleet, e.committer = l, l
	if err := n.Start(l); err != nil {
		e.fleet, e.committer = nil, localCommitter{e}
		return fail(err)
	}
	l.checkpointLoop()
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
		if len(b) != 8+len(fleet.Chain{}) {
			return fmt.Errorf("%w: this directory's place in the stream is %d bytes, without the stream's chain: it was made by an earlier release; "+
				"delete it and let the node make it again from the stream", ErrFleet, len(b))
		}
		seq = binary.BigEndian.Uint64(b)
		return nil
	})
	return seq, err
}

// Applied implements fleet.Applier.
func (l *fleetLink) Applied() (seq uint64, chain fleet.Chain, err error) {
	err = l.e.db.View(func(t *store.Txn) error {
		seq, chain, err = l.applied(t)
		return err
	})
	return seq, chain, err
}

// Apply implements fleet.Applier: the record is decoded and verified,
// then applied in one commit with the node's place in the stream. A record
// that does not verify, or that apply refuses the same way on every node,
// is refused: only the place is stored.
func (l *fleetLink) Apply(ctx context.Context, seq uint64, kind fleet.Kind, key string, data []byte, chain fleet.Chain) error {
	e := l.e
	if wseq, wchain := l.witnessed(); seq == wseq && chain != wchain {
		return fmt.Errorf("%w: the first %d records are not those this node's witness %s saw: a record before it was dropped, reordered, inserted or altered, or the stream cut and written again",
			fleet.ErrRewritten, seq, l.witnessFile)
	}
	if kind == fleet.Checkpoint {
		return l.applyCheckpoint(ctx, seq, key, data, chain)
	}
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
			return l.setApplied(t, seq, chain)
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
	if cerr := e.db.Commit(ctx, 64, func(t *store.Txn) error { return l.setApplied(t, seq, chain) }); cerr != nil {
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
// catchUp waits, bounded, until this node has applied what the stream held.
func (l *fleetLink) catchUp(ctx context.Context) (bool, error) { return true, l.n.Barrier(ctx) }

func (l *fleetLink) commit(ctx context.Context, r *record) error {
	if err := l.writable(ctx); err != nil {
		return err
	}
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
	default:
		if err := l.published(ctx, m.kind); err != nil {
			return err
		}
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
	// Halted is why the node stopped applying for good: the stream is not
	// the one it read (records dropped, reordered or inserted before a
	// checkpoint, or its end cut before the node's witness).
	Halted string `json:"halted,omitempty"`
	// Witnessed is the last sequence of the latest fleet checkpoint the
	// node's witness holds (0: none).
	Witnessed uint64 `json:"witnessed"`
}

// fleetStatus is this node's place in the fleet's stream; false on an
// engine that is not a fleet node.
func (e *Engine) fleetStatus() (FleetStatus, bool) {
	if e.fleet == nil {
		return FleetStatus{}, false
	}
	s := e.fleet.n.Status()
	ready, why := e.fleet.n.Ready()
	if ready {
		if err := e.fleet.writable(context.Background()); err != nil {
			ready, why = false, err.Error()
		}
	}
	w, _ := e.fleet.witnessed()
	return FleetStatus{Applied: s.Applied, Last: s.Last, Lag: s.Lag(), Connected: s.Connected, Applies: s.Applies,
		Refused: s.Refused, Ready: ready, Why: why, Err: s.Err, Halted: s.Halted, Witnessed: w}, true
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
// fleet's stream held when it was called. It fails with an error wrapping
// ErrFleetRewritten when the node stopped at a rewritten stream, or the
// stream ends before what the node's witness saw.
func (e *Engine) fleetSync(ctx context.Context) error {
	if e.fleet == nil {
		return nil
	}
	if err := e.fleet.n.Barrier(ctx); err != nil {
		return err
	}
	// A stream cut before this node's witness is applied to its end, and
	// still refused.
	if err := e.fleet.writable(ctx); errors.Is(err, fleet.ErrRewritten) {
		return err
	}
	return nil
}

// fleetCheckpoint publishes this node's checkpoint of the fleet's stream
// up to the last record it applied, and waits until it has applied and
// witnessed it (nodes do so on their own: see WithCheckpointEvery).
func (e *Engine) fleetCheckpoint(ctx context.Context) error {
	if e.fleet == nil {
		return nil
	}
	if err := e.fleet.writable(ctx); err != nil {
		return err
	}
	e.fleet.cpmu.Lock()
	defer e.fleet.cpmu.Unlock()
	return e.fleet.checkpoint(ctx)
}

// genesis is the frozen registry as the record that starts a fleet's
// stream.
func (e *Engine) genesis() ([]byte, error) { return e.reg.Genesis() }

// Fleet is the view of an engine's place in a fleet (see WithFleet). On a
// local engine Status says false, Refusals is empty and Sync returns at once.
type Fleet struct{ e *Engine }

// Fleet is the engine's place in its fleet.
func (e *Engine) Fleet() *Fleet { return &Fleet{e} }

// Status is this node's place in the fleet's stream; false on an engine that
// is not a fleet node.
func (f *Fleet) Status() (FleetStatus, bool) { return f.e.fleetStatus() }

// Refusals are the records this node refused (the latest 1000).
func (f *Fleet) Refusals() []FleetRefusal { return f.e.fleetRefusals() }

// Sync waits, bounded by ctx, until this node has applied every record the
// stream held when it was called. It fails with an error wrapping
// ErrFleetRewritten when the node stopped at a rewritten stream, or the
// stream ends before what the node's witness saw.
func (f *Fleet) Sync(ctx context.Context) error { return f.e.fleetSync(ctx) }

// Genesis is the frozen registry as the record that starts a fleet's stream.
func (f *Fleet) Genesis() ([]byte, error) { return f.e.genesis() }

// Checkpoint publishes this node's checkpoint of the fleet's stream up to
// the last record it applied, and waits until it has applied and witnessed
// it (nodes do so on their own: see WithCheckpointEvery).
func (f *Fleet) Checkpoint(ctx context.Context) error { return f.e.fleetCheckpoint(ctx) }
