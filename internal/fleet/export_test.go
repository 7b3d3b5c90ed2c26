package fleet

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RawPublisher publishes bytes onto the fleet's stream as anyone with
// access to the NATS servers could: the tests' hostile writer.
func RawPublisher(url string) (*Raw, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &Raw{nc: nc, js: js}, nil
}

// Raw is a hostile writer.
type Raw struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// Publish appends data on subject and returns its sequence.
func (r *Raw) Publish(ctx context.Context, subject string, data []byte) (uint64, error) {
	ack, err := r.js.Publish(ctx, subject, data)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// Close closes the connection.
func (r *Raw) Close() { r.nc.Close() }

// Healthy reports whether the stream has a leader and every other replica
// is current.
func (r *Raw) Healthy(ctx context.Context, stream string, replicas int) bool {
	s, err := r.js.Stream(ctx, stream)
	if err != nil {
		return false
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != replicas-1 {
		return false
	}
	for _, p := range info.Cluster.Replicas {
		if !p.Current || p.Offline {
			return false
		}
	}
	return true
}

// HasLeader reports whether the stream has a leader.
func (r *Raw) HasLeader(ctx context.Context, stream string) bool {
	s, err := r.js.Stream(ctx, stream)
	if err != nil {
		return false
	}
	info, err := s.Info(ctx)
	return err == nil && info.Cluster != nil && info.Cluster.Leader != ""
}

// Last is the data of the last record on subject.
func (r *Raw) Last(ctx context.Context, stream, subject string) ([]byte, error) {
	s, err := r.js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	m, err := s.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		return nil, err
	}
	return m.Data, nil
}

// Msg is a record of the stream as a rewriter sees it.
type Msg struct {
	Subject string
	Data    []byte
}

// Rewrite replaces the stream with a copy of it without the records keep
// refuses, as whoever administers the servers could (delete the stream,
// create it again, publish the genuine records it chooses).
func (r *Raw) Rewrite(ctx context.Context, stream, prefix string, replicas int, keep func(subject string) bool) error {
	return r.RewriteWith(ctx, stream, prefix, replicas, func(msgs []Msg) []Msg {
		var out []Msg
		for _, m := range msgs {
			if keep(m.Subject) {
				out = append(out, m)
			}
		}
		return out
	})
}

// RewriteWith replaces the stream with the records edit makes of its
// records (in stream order): dropped, reordered, cut.
func (r *Raw) RewriteWith(ctx context.Context, stream, prefix string, replicas int, edit func([]Msg) []Msg) error {
	s, err := r.js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	var msgs []Msg
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			return err
		}
		msgs = append(msgs, Msg{m.Subject, m.Data})
	}
	msgs = edit(msgs)
	if err := r.js.DeleteStream(ctx, stream); err != nil {
		return err
	}
	if _, err := r.js.CreateStream(ctx, streamConfig(stream, prefix, replicas)); err != nil {
		return err
	}
	for _, m := range msgs {
		if _, err := r.js.Publish(ctx, m.Subject, m.Data); err != nil {
			return err
		}
	}
	return nil
}
