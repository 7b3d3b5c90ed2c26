package fleet

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerOptions configure an embedded NATS server with JetStream: the
// one-machine trial mode of `pedigree serve --nats embedded`, and the
// fleet's tests.
type ServerOptions struct {
	// Name is the server's name (unique in a cluster).
	Name string
	// Dir holds its JetStream file store.
	Dir string
	// Port is the client port on 127.0.0.1 (0: a free one).
	Port int
	// Cluster, ClusterPort and Routes join a cluster: every server of it
	// is given the same Cluster name and every server's route URL.
	Cluster     string
	ClusterPort int
	Routes      []string
	// Log the server's own log lines (off by default).
	Log bool
	// User and Password, when set, are the only credentials the server
	// takes: a client without them is refused.
	User, Password string
	// TLSCert and TLSKey make the client port TLS only; with TLSCA the
	// server also requires a client certificate that chains to it.
	TLSCert, TLSKey, TLSCA string
	// Permissions, when set with User, bound what that user may publish
	// and subscribe to (NodePermissions is a node's).
	Permissions *Permissions
}

// Permissions are the subjects a NATS user may publish and subscribe to.
type Permissions struct {
	Publish, Subscribe []string
}

// Server is an embedded NATS server.
type Server struct {
	s *server.Server
}

// StartServer starts an embedded NATS server with JetStream on loopback,
// with sync_interval "always": every replica fsyncs a record before it
// counts toward the quorum that acknowledges it.
func StartServer(o ServerOptions) (*Server, error) {
	if o.Dir == "" {
		return nil, errors.New("fleet: an embedded server needs a directory for its file store")
	}
	port := o.Port
	if port == 0 {
		port = -1
	}
	opts := &server.Options{
		ServerName: o.Name,
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   o.Dir,
		SyncAlways: true,
		// The fleet's records are at most MaxRecordBytes.
		MaxPayload: MaxRecordBytes + 64<<10,
		NoSigs:     true,
		NoLog:      !o.Log,
	}
	if o.User != "" {
		u := &server.User{Username: o.User, Password: o.Password}
		if p := o.Permissions; p != nil {
			u.Permissions = &server.Permissions{Publish: &server.SubjectPermission{Allow: p.Publish},
				Subscribe: &server.SubjectPermission{Allow: p.Subscribe}}
		}
		opts.Users = []*server.User{u}
	}
	if o.TLSCert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: o.TLSCert, KeyFile: o.TLSKey, CaFile: o.TLSCA, Verify: o.TLSCA != ""})
		if err != nil {
			return nil, fmt.Errorf("fleet: the server's TLS: %w", err)
		}
		opts.TLS, opts.TLSConfig, opts.TLSVerify, opts.TLSTimeout = true, tc, o.TLSCA != "", 2
	}
	if o.Cluster != "" {
		opts.Cluster = server.ClusterOpts{Name: o.Cluster, Host: "127.0.0.1", Port: o.ClusterPort}
		for _, r := range o.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, fmt.Errorf("fleet: route %q: %w", r, err)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	if o.Log {
		s.ConfigureLogger()
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("fleet: the embedded NATS server did not start")
	}
	return &Server{s: s}, nil
}

// URL is the server's client URL.
func (s *Server) URL() string { return s.s.ClientURL() }

// Name is the server's name.
func (s *Server) Name() string { return s.s.Name() }

// Shutdown stops the server and waits for it.
func (s *Server) Shutdown() {
	s.s.Shutdown()
	s.s.WaitForShutdown()
}

// StreamLeader reports whether this server leads the named stream.
func (s *Server) StreamLeader(stream string) bool {
	return s.s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream)
}

// FreePort is a free TCP port on 127.0.0.1, for a cluster's route URLs.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// RouteURL is the route URL of a cluster port on loopback.
func RouteURL(port int) string { return "nats://127.0.0.1:" + strconv.Itoa(port) }
