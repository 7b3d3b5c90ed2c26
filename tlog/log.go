package tlog

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/pedigree-ai/pedigree/kv"
	"github.com/pedigree-ai/pedigree/registry"
)

// Leaf kinds.
const (
	LeafEntry    byte = 'e'
	LeafDecision byte = 'd'
	LeafRecall   byte = 'r'
)

// KindName names a leaf kind for people and proofs.
func KindName(kind byte) string {
	switch kind {
	case LeafEntry:
		return "entry"
	case LeafDecision:
		return "decision"
	case LeafRecall:
		return "recall"
	}
	return fmt.Sprintf("kind %q", kind)
}

var (
	// ErrMalformed: a checkpoint, proof or request that is not well formed.
	ErrMalformed = errors.New("malformed log record")
	// ErrNotLogged: the entry or decision is not in the log.
	ErrNotLogged = errors.New("not in the log")
	// ErrNoCheckpoint: no checkpoint of that size (or none at all).
	ErrNoCheckpoint = errors.New("no such checkpoint")
)

// Rows of the log's namespace.
const (
	keyLogState = "state" // size (8 bytes) + the compact range's hashes
	pLogNode    = "n/"    // n/<level><index> -> hash of a complete subtree
	pLogLeaf    = "leaf/" // leaf/<index> -> kind + raw ID
	pLogIndex   = "i/"    // i/<kind><id> -> index
	pCheckpoint = "cp/"   // cp/<size> -> signed Checkpoint
	leafPrefix  = "pedigree-log-v1\x00"
)

var hasher = rfc6962.DefaultHasher

var rangeFactory = &compact.RangeFactory{Hash: hasher.HashChildren}

func nodeKey(id compact.NodeID) []byte {
	b := append([]byte(pLogNode), byte(id.Level))
	return binary.BigEndian.AppendUint64(b, id.Index)
}

func leafKey(i uint64) []byte { return binary.BigEndian.AppendUint64([]byte(pLogLeaf), i) }

func indexKey(kind byte, id string) []byte { return append(append([]byte(pLogIndex), kind), id...) }

// LeafData is what a leaf commits to: its kind and the raw ID (an entry's
// ID is the hash of its signed bytes; a decision's the hash of its record).
func LeafData(kind byte, id string) ([]byte, error) {
	raw, err := hex.DecodeString(id)
	if err != nil || len(raw) != 32 {
		return nil, fmt.Errorf("%w: log leaf %q is not a 64-hex ID", ErrMalformed, id)
	}
	return append(append([]byte(leafPrefix), kind), raw...), nil
}

type logState struct {
	size   uint64
	hashes [][]byte
}

func readLogState(t kv.Txn) (*logState, error) {
	b, err := t.Get([]byte(keyLogState))
	if errors.Is(err, kv.ErrNotFound) {
		return &logState{}, nil
	}
	if err != nil {
		return nil, err
	}
	if len(b)%32 != 8 { // the size (8 bytes), then whole 32-byte hashes
		return nil, errors.New("log state is malformed")
	}
	s := &logState{size: binary.BigEndian.Uint64(b)}
	for rest := b[8:]; len(rest) > 0; rest = rest[32:] {
		s.hashes = append(s.hashes, rest[:32])
	}
	return s, nil
}

// Append adds a leaf to the log inside t (the log's namespace of the
// transaction that stores what is logged) and returns its index. Every
// transaction that logs something reads and writes the log state, so leaves
// get gap-free indices in commit order.
func Append(t kv.Txn, kind byte, id string) (uint64, error) {
	data, err := LeafData(kind, id)
	if err != nil {
		return 0, err
	}
	st, err := readLogState(t)
	if err != nil {
		return 0, err
	}
	r, err := rangeFactory.NewRange(0, st.size, st.hashes)
	if err != nil {
		return 0, fmt.Errorf("log state: %w", err)
	}
	index := st.size
	leaf := hasher.HashLeaf(data)
	var werr error
	visit := func(nid compact.NodeID, h []byte) {
		if werr == nil {
			werr = t.Set(nodeKey(nid), bytes.Clone(h))
		}
	}
	// Append visits the leaf itself, then every subtree it completes.
	if err := r.Append(leaf, visit); err != nil {
		return 0, err
	}
	if werr != nil {
		return 0, werr
	}
	state := binary.BigEndian.AppendUint64(nil, r.End())
	for _, h := range r.Hashes() {
		state = append(state, h...)
	}
	if err := t.Set([]byte(keyLogState), state); err != nil {
		return 0, err
	}
	if err := t.Set(leafKey(index), append([]byte{kind}, data[len(leafPrefix)+1:]...)); err != nil {
		return 0, err
	}
	return index, t.Set(indexKey(kind, id), binary.BigEndian.AppendUint64(nil, index))
}

// Log reads the log, checks and stores checkpoints, and builds proofs.
type Log struct {
	store    kv.Store
	operator *registry.Verifier
	// engines are the engine keys the registry certifies: they sign the
	// checkpoints the engine hands to its witnesses (a checkpoint kept
	// elsewhere may be signed by one of them or by the operator).
	engines []*registry.Verifier
}

// SetEngineKeys names the engine keys whose checkpoints count as kept
// elsewhere (witnessed) besides the operator's.
func (l *Log) SetEngineKeys(keys []ed25519.PublicKey) error {
	l.engines = nil
	for _, k := range keys {
		v, err := registry.NewVerifier(k)
		if err != nil {
			return err
		}
		l.engines = append(l.engines, v)
	}
	return nil
}

// CheckSigned checks that cp is signed by the operator or an engine key
// (SetEngineKeys).
func (l *Log) CheckSigned(cp *Checkpoint) error { return l.checkWitnessed(cp) }

// checkWitnessed checks a checkpoint kept elsewhere: signed by the
// operator, or by an engine key the registry certifies.
func (l *Log) checkWitnessed(c *Checkpoint) error {
	if err := l.checkCheckpoint(c); err == nil {
		return nil
	}
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	if err == nil {
		for _, v := range l.engines {
			if v.Verify(sig, c.signed()) == nil {
				return nil
			}
		}
	}
	return fmt.Errorf("checkpoint %d: %w", c.Size, registry.ErrBadSignature)
}

// RootAt is the root of the log's first size leaves, and the log's size
// now (ErrNotExtension when size is beyond it).
func (l *Log) RootAt(size uint64) (string, uint64, error) {
	var root []byte
	var now uint64
	err := l.store.View(func(t kv.Txn) error {
		st, err := readLogState(t)
		if err != nil {
			return err
		}
		now = st.size
		if size > now {
			return fmt.Errorf("%w: the log has %d leaves, the checkpoint %d", ErrNotExtension, now, size)
		}
		root, err = rootAt(t, size)
		return err
	})
	return hex.EncodeToString(root), now, err
}

// New returns the log kept in store, whose checkpoints the operator key
// signs.
func New(store kv.Store, operator ed25519.PublicKey) (*Log, error) {
	v, err := registry.NewVerifier(operator)
	if err != nil {
		return nil, err
	}
	return &Log{store: store, operator: v}, nil
}

// Checkpoint is a signed statement of the log's size and root.
type Checkpoint struct {
	Size      uint64 `json:"size"`
	Root      string `json:"root"`
	Time      string `json:"time"`
	Signature string `json:"signature"`
}

func (c *Checkpoint) signed() []byte {
	return []byte("pedigree-checkpoint-v1\n" + strconv.FormatUint(c.Size, 10) + "\n" + c.Root + "\n" + c.Time + "\n")
}

// Size is the number of leaves.
func (l *Log) Size() (uint64, error) {
	var n uint64
	err := l.store.View(func(t kv.Txn) error {
		st, err := readLogState(t)
		n = st.size
		return err
	})
	return n, err
}

// matches reports, inside t, the log's size and whether the log holds the
// checkpoint's tree: at least its size, and its root at that size.
func matches(t kv.Txn, cp *Checkpoint) (uint64, bool, error) {
	st, err := readLogState(t)
	if err != nil {
		return 0, false, err
	}
	if cp.Size > st.size {
		return st.size, false, nil
	}
	root, err := rootAt(t, cp.Size)
	if err != nil {
		return st.size, false, err
	}
	return st.size, hex.EncodeToString(root) == cp.Root, nil
}

// rootAt computes the root of the first size leaves from stored nodes.
func rootAt(t kv.Txn, size uint64) ([]byte, error) {
	if size == 0 {
		return hasher.EmptyRoot(), nil
	}
	ids := compact.RangeNodes(0, size, nil)
	hashes, err := getNodes(t, ids)
	if err != nil {
		return nil, err
	}
	r, err := rangeFactory.NewRange(0, size, hashes)
	if err != nil {
		return nil, err
	}
	return r.GetRootHash(nil)
}

func getNodes(t kv.Txn, ids []compact.NodeID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		h, err := t.Get(nodeKey(id))
		if err != nil {
			return nil, fmt.Errorf("log node (level %d, index %d): %w", id.Level, id.Index, err)
		}
		out[i] = h
	}
	return out, nil
}

// Head is the log's current size and root.
func (l *Log) Head() (uint64, string, error) {
	var size uint64
	var root []byte
	err := l.store.View(func(t kv.Txn) error {
		st, err := readLogState(t)
		if err != nil {
			return err
		}
		size = st.size
		root, err = rootAt(t, size)
		return err
	})
	return size, hex.EncodeToString(root), err
}

// SignCheckpoint signs a log size and root with the operator key. Whoever
// holds the key signs; the engine checks and stores (AddCheckpoint).
func SignCheckpoint(operator *registry.Signer, size uint64, root string, now time.Time) (*Checkpoint, error) {
	cp := &Checkpoint{Size: size, Root: root, Time: now.UTC().Format(time.RFC3339Nano)}
	sig, err := operator.Sign(cp.signed())
	if err != nil {
		return nil, err
	}
	cp.Signature = base64.StdEncoding.EncodeToString(sig)
	return cp, nil
}

// AddCheckpoint stores a checkpoint after checking that the operator
// signed it and that its root is the log's root at its size.
func (l *Log) AddCheckpoint(ctx context.Context, cp *Checkpoint) error {
	if err := l.checkCheckpoint(cp); err != nil {
		return fmt.Errorf("%w: signed with a key that is not the operator key of this store", registry.ErrBadKey)
	}
	if _, err := time.Parse(time.RFC3339Nano, cp.Time); err != nil {
		return fmt.Errorf("%w: checkpoint time %q", ErrMalformed, cp.Time)
	}
	return l.store.Commit(ctx, 512, func(t kv.Txn) error {
		size, ok, err := matches(t, cp)
		switch {
		case err != nil:
			return err
		case cp.Size > size:
			return fmt.Errorf("%w: checkpoint of size %d, the log has %d leaves", ErrMalformed, cp.Size, size)
		case !ok:
			return fmt.Errorf("%w: checkpoint root %s is not the log's root at size %d", ErrMalformed, cp.Root, cp.Size)
		}
		b, _ := json.Marshal(cp)
		k := binary.BigEndian.AppendUint64([]byte(pCheckpoint), cp.Size)
		if err := refuseOverwrite(t, k, b); err != nil {
			return err
		}
		return t.Set(k, b)
	})
}

// Checkpoints lists the stored checkpoints, smallest first.
func (l *Log) Checkpoints() ([]Checkpoint, error) {
	var out []Checkpoint
	err := l.store.View(func(t kv.Txn) error {
		return t.Iterate([]byte(pCheckpoint), true, func(_, v []byte) error {
			var c Checkpoint
			if err := json.Unmarshal(v, &c); err != nil {
				return err
			}
			out = append(out, c)
			return nil
		})
	})
	return out, err
}

// checkpoint returns the checkpoint of a size, or the latest when size is 0.
func (l *Log) checkpoint(size uint64) (*Checkpoint, error) {
	cps, err := l.Checkpoints()
	if err != nil {
		return nil, err
	}
	for i := len(cps) - 1; i >= 0; i-- {
		if size == 0 || cps[i].Size == size {
			if err := l.checkCheckpoint(&cps[i]); err != nil {
				return nil, err
			}
			return &cps[i], nil
		}
	}
	if size == 0 {
		return nil, fmt.Errorf("%w: the log has no checkpoint yet", ErrNoCheckpoint)
	}
	return nil, fmt.Errorf("%w of size %d", ErrNoCheckpoint, size)
}

func (l *Log) checkCheckpoint(c *Checkpoint) error {
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil {
		return fmt.Errorf("checkpoint %d: %w", c.Size, registry.ErrBadSignature)
	}
	if err := l.operator.Verify(sig, c.signed()); err != nil {
		return fmt.Errorf("checkpoint %d: %w", c.Size, registry.ErrBadSignature)
	}
	return nil
}

// InclusionProof proves that a logged entry or decision is in the tree of a
// checkpoint.
type InclusionProof struct {
	Kind       string     `json:"kind"`
	ID         string     `json:"id"`
	Index      uint64     `json:"index"`
	LeafHash   string     `json:"leaf_hash"`
	Hashes     []string   `json:"hashes"`
	Checkpoint Checkpoint `json:"checkpoint"`
}

// Prove builds an inclusion proof for id (an entry, else a decision, else a
// recall) against the checkpoint of size (0: the latest), and verifies it.
func (l *Log) Prove(id string, size uint64) (*InclusionProof, error) {
	cp, err := l.checkpoint(size)
	if err != nil {
		return nil, err
	}
	return l.prove(id, cp)
}

func (l *Log) prove(id string, cp *Checkpoint) (*InclusionProof, error) {
	p := &InclusionProof{ID: id, Checkpoint: *cp}
	err := l.store.View(func(t kv.Txn) error {
		var b []byte
		for _, kind := range []byte{LeafEntry, LeafDecision, LeafRecall} {
			var err error
			if b, err = t.Get(indexKey(kind, id)); err == nil {
				p.Kind = KindName(kind)
				break
			} else if !errors.Is(err, kv.ErrNotFound) {
				return err
			}
		}
		if b == nil {
			return fmt.Errorf("%s: %w", id, ErrNotLogged)
		}
		p.Index = binary.BigEndian.Uint64(b)
		if p.Index >= cp.Size {
			return fmt.Errorf("%s was logged at index %d, after checkpoint %d: %w", id, p.Index, cp.Size, ErrNoCheckpoint)
		}
		nodes, err := proof.Inclusion(p.Index, cp.Size)
		if err != nil {
			return err
		}
		if p.Hashes, err = proofHashes(t, nodes); err != nil {
			return err
		}
		leaf, err := t.Get(nodeKey(compact.NewNodeID(0, p.Index)))
		if err != nil {
			return err
		}
		p.LeafHash = hex.EncodeToString(leaf)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, p.Verify()
}

// Verify checks the proof against its checkpoint's root, and that the leaf
// hash is the hash of the leaf it claims to be.
func (p *InclusionProof) Verify() error {
	var kind byte
	for _, k := range []byte{LeafEntry, LeafDecision, LeafRecall} {
		if KindName(k) == p.Kind {
			kind = k
		}
	}
	if kind == 0 {
		return fmt.Errorf("%w: proof of unknown leaf kind %q", ErrMalformed, p.Kind)
	}
	data, err := LeafData(kind, p.ID)
	if err != nil {
		return err
	}
	if hex.EncodeToString(hasher.HashLeaf(data)) != p.LeafHash {
		return errors.New("the leaf hash is not the hash of this leaf")
	}
	return proof.VerifyInclusion(hasher, p.Index, p.Checkpoint.Size, hasher.HashLeaf(data), unhex(p.Hashes), unhexOne(p.Checkpoint.Root))
}

// ConsistencyProof proves that the tree of an older checkpoint is a prefix
// of a newer one's: nothing logged before was removed or changed.
type ConsistencyProof struct {
	Old    Checkpoint `json:"old"`
	New    Checkpoint `json:"new"`
	Hashes []string   `json:"hashes"`
}

// Consistency builds and verifies a consistency proof between two
// checkpoints.
func (l *Log) Consistency(oldSize, newSize uint64) (*ConsistencyProof, error) {
	if oldSize > newSize {
		return nil, fmt.Errorf("%w: old size %d is larger than new size %d", ErrMalformed, oldSize, newSize)
	}
	o, err := l.checkpoint(oldSize)
	if err != nil {
		return nil, err
	}
	n, err := l.checkpoint(newSize)
	if err != nil {
		return nil, err
	}
	p := &ConsistencyProof{Old: *o, New: *n, Hashes: []string{}}
	err = l.store.View(func(t kv.Txn) error {
		nodes, err := proof.Consistency(oldSize, newSize)
		if err != nil {
			return err
		}
		p.Hashes, err = proofHashes(t, nodes)
		return err
	})
	if err != nil {
		return nil, err
	}
	return p, p.Verify()
}

// Verify checks the proof against the two checkpoints' roots.
func (p *ConsistencyProof) Verify() error {
	return proof.VerifyConsistency(hasher, p.Old.Size, p.New.Size, unhex(p.Hashes), unhexOne(p.Old.Root), unhexOne(p.New.Root))
}

// proofHashes reads the stored nodes a proof names and folds the ephemeral
// one, as hex.
func proofHashes(t kv.Txn, nodes proof.Nodes) ([]string, error) {
	hashes, err := getNodes(t, nodes.IDs)
	if err != nil {
		return nil, err
	}
	if hashes, err = nodes.Rehash(hashes, hasher.HashChildren); err != nil {
		return nil, err
	}
	out := make([]string, len(hashes))
	for i, h := range hashes {
		out[i] = hex.EncodeToString(h)
	}
	return out, nil
}

func unhex(hs []string) [][]byte {
	out := make([][]byte, len(hs))
	for i, h := range hs {
		out[i] = unhexOne(h)
	}
	return out
}

func unhexOne(h string) []byte {
	b, _ := hex.DecodeString(h)
	return b
}

// Verify recomputes the tree from the leaves inside t (the log's namespace
// of one read transaction): each leaf is handed to logged, which checks that
// what it names is stored and intact (at that index); every stored subtree
// hash and index row must match the leaves; every checkpoint must be signed
// by the operator and match the root at its size. What it finds wrong goes
// to bad; an error means it could not check.
func (l *Log) Verify(ctx context.Context, t kv.Txn, logged func(index uint64, kind byte, id string) error, bad func(id, f string, a ...any)) error {
	return l.VerifyWith(ctx, t, nil, logged, bad)
}

// VerifyWith is Verify, and checks that the log extends each of external,
// checkpoints kept elsewhere: a log behind one, or not an extension of one,
// or one not signed by the operator, is a problem.
func (l *Log) VerifyWith(ctx context.Context, t kv.Txn, external []Checkpoint, logged func(index uint64, kind byte, id string) error, bad func(id, f string, a ...any)) error {
	cps := map[uint64]Checkpoint{}
	if err := t.Iterate([]byte(pCheckpoint), true, func(_, v []byte) error {
		var c Checkpoint
		if err := json.Unmarshal(v, &c); err != nil {
			bad("", "a checkpoint does not decode: %v", err)
			return nil
		}
		if err := l.checkCheckpoint(&c); err != nil {
			bad("", "%v", err)
			return nil
		}
		cps[c.Size] = c
		return nil
	}); err != nil {
		return err
	}
	ext := l.externalCheckpoints(external, bad)
	checkRoot := func(size uint64, r *compact.Range) {
		c, ok := cps[size]
		e, isExt := ext[size]
		if !ok && !isExt {
			return
		}
		root, err := r.GetRootHash(nil)
		if ok && (err != nil || hex.EncodeToString(root) != c.Root) {
			bad("", "the log's first %d leaves do not hash to checkpoint %d's root: an entry or decision was deleted, reordered or rewritten", size, size)
		}
		if isExt && (err != nil || hex.EncodeToString(root) != e.Root) {
			bad("", "the store is not an extension of the checkpoint kept elsewhere: its first %d leaves do not hash to that checkpoint's root", size)
		}
	}
	r := rangeFactory.NewEmptyRange(0)
	checkRoot(0, r)
	var next uint64
	subtrees := 0 // stored subtree hashes recomputed from the leaves
	leaves := map[string]uint64{}
	err := t.Iterate([]byte(pLogLeaf), true, func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		i := binary.BigEndian.Uint64(k[len(pLogLeaf):])
		if i != next {
			bad("", "log leaf %d is missing", next)
			return fmt.Errorf("%w: the log's leaves are not contiguous at %d", ErrMalformed, next)
		}
		next++
		if len(v) != 33 {
			bad("", "log leaf %d is malformed", i)
			return fmt.Errorf("%w: log leaf %d", ErrMalformed, i)
		}
		kind, id := v[0], hex.EncodeToString(v[1:])
		if err := logged(i, kind, id); err != nil {
			bad(id, "log leaf %d (%s): %v", i, KindName(kind), err)
		}
		leaves[string(indexKey(kind, id))] = i
		if b, err := t.Get(indexKey(kind, id)); err != nil || len(b) != 8 || binary.BigEndian.Uint64(b) != i {
			bad(id, "the index row of log leaf %d is missing or wrong", i)
		}
		data, _ := LeafData(kind, id)
		leaf := hasher.HashLeaf(data)
		check := func(nid compact.NodeID, want []byte) {
			subtrees++
			if h, err := t.Get(nodeKey(nid)); err != nil || !bytes.Equal(h, want) {
				bad(id, "the log's stored hash of subtree (level %d, index %d) does not match the leaves", nid.Level, nid.Index)
			}
		}
		if err := r.Append(leaf, check); err != nil { // visits the leaf, then each subtree it completes
			return err
		}
		checkRoot(r.End(), r)
		return nil
	})
	if err != nil {
		return err
	}
	st, err := readLogState(t)
	switch {
	case err != nil:
		bad("", "%v", err)
	case st.size != r.End():
		bad("", "the log says it has %d leaves; %d are stored", st.size, r.End())
	case !slices.EqualFunc(st.hashes, r.Hashes(), bytes.Equal):
		bad("", "the log's state row does not match its leaves")
	}
	for size := range cps {
		if size > r.End() {
			bad("", "checkpoint %d is larger than the log (%d leaves): leaves were deleted", size, r.End())
		}
	}
	for size := range ext {
		if size > r.End() {
			bad("", "the store is behind the checkpoint kept elsewhere: its log has %d leaves, the checkpoint %d (an old copy restored, or leaves deleted)", r.End(), size)
		}
	}
	// Rows the leaves do not account for.
	n := 0
	if err := t.Iterate([]byte(pLogNode), false, func(_, _ []byte) error { n++; return nil }); err != nil {
		return err
	}
	if n != subtrees {
		bad("", "the log holds %d subtree hashes, its leaves make %d", n, subtrees)
	}
	if err := t.Iterate([]byte(pLogIndex), false, func(k, _ []byte) error {
		if _, ok := leaves[string(k)]; !ok {
			bad("", "an index row names no log leaf")
		}
		return nil
	}); err != nil {
		return err
	}
	return nil
}

// externalCheckpoints keeps the checkpoints kept elsewhere that the
// operator signed; one that is not is a problem (a store rebuilt with
// another operator key fails here).
func (l *Log) externalCheckpoints(cps []Checkpoint, bad func(string, string, ...any)) map[uint64]Checkpoint {
	out := map[uint64]Checkpoint{}
	for _, c := range cps {
		if err := l.checkWitnessed(&c); err != nil {
			bad("", "the checkpoint kept elsewhere (size %d) is not signed by this store's operator key or its engine key", c.Size)
			continue
		}
		out[c.Size] = c
	}
	return out
}

// refuseOverwrite refuses to replace a stored checkpoint with other bytes.
func refuseOverwrite(t kv.Txn, k, b []byte) error {
	old, err := t.Get(k)
	switch {
	case errors.Is(err, kv.ErrNotFound):
		return nil
	case err != nil:
		return err
	case !bytes.Equal(old, b):
		return ErrCheckpointExists
	}
	return nil
}

// ErrGap: the log's rows disagree (a leaf missing in the middle, one beyond
// its size, an index row that names another leaf): something was deleted or
// rewritten. A reader that finds it fails closed.
var ErrGap = errors.New("the log's rows disagree: a leaf or its index was deleted or rewritten")

// LeafIndex returns, inside t, the index of the leaf that logs id (of
// kind), after checking that the leaf at that index names it.
func LeafIndex(t kv.Txn, kind byte, id string) (uint64, error) {
	b, err := t.Get(indexKey(kind, id))
	if errors.Is(err, kv.ErrNotFound) {
		return 0, fmt.Errorf("%s %s: %w", KindName(kind), id, ErrNotLogged)
	}
	if err != nil {
		return 0, err
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("%s %s: %w", KindName(kind), id, ErrGap)
	}
	i := binary.BigEndian.Uint64(b)
	leaf, err := t.Get(leafKey(i))
	if err != nil {
		return 0, fmt.Errorf("leaf %d: %w", i, ErrGap)
	}
	want, err := LeafData(kind, id)
	if err != nil {
		return 0, err
	}
	if !bytes.Equal(leaf, append([]byte{kind}, want[len(leafPrefix)+1:]...)) {
		return 0, fmt.Errorf("leaf %d does not name %s %s: %w", i, KindName(kind), id, ErrGap)
	}
	return i, nil
}

// LeavesFrom calls fn, inside t, with every leaf from index from to the end
// of the log, in order. A leaf missing below the log's size, or one stored
// at or beyond it, is ErrGap: the caller must not take the leaves it saw
// for the whole of that stretch.
func LeavesFrom(t kv.Txn, from uint64, fn func(index uint64, kind byte, id string) error) error {
	st, err := readLogState(t)
	if err != nil {
		return err
	}
	if from > st.size {
		return fmt.Errorf("leaf %d is beyond the log's size %d: %w", from, st.size, ErrGap)
	}
	for i := from; i < st.size; i++ {
		v, err := t.Get(leafKey(i))
		if errors.Is(err, kv.ErrNotFound) || (err == nil && len(v) != 33) {
			return fmt.Errorf("leaf %d: %w", i, ErrGap)
		}
		if err != nil {
			return err
		}
		if err := fn(i, v[0], hex.EncodeToString(v[1:])); err != nil {
			return err
		}
	}
	// A leaf past the size is a log whose state was cut back.
	if _, err := t.Get(leafKey(st.size)); !errors.Is(err, kv.ErrNotFound) {
		return fmt.Errorf("a leaf is stored at %d, past the log's size: %w", st.size, ErrGap)
	}
	return nil
}

// pAttestation holds the engine's signature of each leaf (see the root
// package's enginekey.go): a[<index>] -> DSSE envelope.
const pAttestation = "a/"

func attestationKey(i uint64) []byte { return binary.BigEndian.AppendUint64([]byte(pAttestation), i) }

// SetAttestation stores, inside t, the engine's signed attestation of the
// leaf at index.
func SetAttestation(t kv.Txn, index uint64, env []byte) error {
	return t.Set(attestationKey(index), env)
}

// Attestation returns, inside t, the engine's attestation of the leaf at
// index.
func Attestation(t kv.Txn, index uint64) ([]byte, error) {
	return t.Get(attestationKey(index))
}
