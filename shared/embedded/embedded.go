// Package embedded runs nats-server with JetStream inside the process: for `maintctl up`,
// local trials and every test that touches NATS (never a mock).
package embedded

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// PingInterval and PingMax are the servers' liveness checks of clients and routes: one left
// unanswered PingMax times in a row, a ping every PingInterval, is dropped, so that what it
// held (a pin, messages in hand) goes to a live one within seconds (README, Partitions).
const (
	PingInterval = 2 * time.Second
	PingMax      = 3
)

// Config configures one embedded server.
type Config struct {
	// Name is the server name; it must stay the same across restarts on one store.
	Name string
	// StoreDir holds JetStream's files.
	StoreDir string
	// Listen is host:port for client connections (port 0: any free port); "" accepts
	// in-process connections only.
	Listen string
	// SyncAlways makes JetStream sync to disk before acknowledging a write (see README,
	// Durability). Off, the file store syncs every two minutes.
	SyncAlways bool
	// Monitor is host:port of the HTTP monitoring endpoint (/varz, /jsz, /healthz: what KEDA's
	// nats-jetstream scaler reads); port 0 picks a free port; "" serves none.
	Monitor string

	// TLS, when set, makes the listener accept TLS connections only (ServerTLS builds one from
	// files). With ClientAuth tls.RequireAndVerifyClientCert and ClientCAs it is mutual TLS:
	// a client without a certificate signed by one of ClientCAs is refused. In-process
	// connections (Connect) skip TLS: nothing of them crosses a wire.
	TLS *tls.Config
	// Domain is the server's JetStream domain (README, Regions): a region's name, or the
	// hub's; "" for none.
	Domain string
	// LeafListen is host:port where the server accepts leaf nodes (the hub); "" for none.
	LeafListen string
	// LeafRemote is the leafnode URL of a hub to join as a leaf node (a region), nats-leaf://
	// or nats://; "" for none. LeafDeny are the subjects that neither leave nor enter the
	// server through it.
	LeafRemote string
	LeafDeny   []string

	// Nkeys, when set, are the only users the server accepts, each with its permissions; use
	// maintsignals/infra/nats NkeyUsers, the rules of the production configuration files.
	// In-process connections authenticate too. Without Nkeys the server has no
	// authentication: keep Listen on loopback.
	Nkeys []*server.NkeyUser
	// ReadyTimeout bounds the wait for the server to accept connections (0: 10 s). A server
	// recovers every stream before it listens, which takes longer on a large store.
	ReadyTimeout time.Duration
	// Logger, when set, receives the server's log (NoLog otherwise): what it recovered at
	// start, and how long each stream took.
	Logger server.Logger
}

// ErrNotReady is returned when the server does not come up in time.
var ErrNotReady = errors.New("embedded nats-server not ready")

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("invalid embedded nats-server config")

func (c Config) validate() error {
	if c.StoreDir == "" {
		return fmt.Errorf("%w: StoreDir is required", ErrInvalidConfig)
	}
	return validateSecurity(c.TLS, c.Nkeys)
}

// validateSecurity checks the client TLS and the users of one server or of every node.
func validateSecurity(t *tls.Config, users []*server.NkeyUser) error {
	if t != nil {
		if len(t.Certificates) == 0 && t.GetCertificate == nil {
			return fmt.Errorf("%w: TLS has no server certificate", ErrInvalidConfig)
		}
		if t.ClientAuth >= tls.VerifyClientCertIfGiven && t.ClientCAs == nil {
			return fmt.Errorf("%w: TLS verifies client certificates but has no ClientCAs", ErrInvalidConfig)
		}
	}
	for i, u := range users {
		if u == nil || u.Nkey == "" {
			return fmt.Errorf("%w: Nkeys[%d] has no public key", ErrInvalidConfig, i)
		}
	}
	return nil
}

// clientTLS makes the client listener of opts accept TLS only, with t.
func clientTLS(opts *server.Options, t *tls.Config) {
	if t == nil {
		return
	}
	opts.TLSConfig = t.Clone()
	if opts.TLSConfig.MinVersion == 0 {
		opts.TLSConfig.MinVersion = tls.VersionTLS12
	}
	opts.TLS = true
	opts.TLSVerify = t.ClientAuth == tls.RequireAndVerifyClientCert
	// The default half second fails handshakes on a busy machine.
	opts.TLSTimeout = tlsTimeout
}

// tlsTimeout, in seconds, bounds the TLS handshakes of clients and routes.
const tlsTimeout = 2

// readyTimeout bounds the wait for the server to accept connections.
const readyTimeout = 10 * time.Second

// Server is a running embedded nats-server.
type Server struct {
	*server.Server
	listens bool
}

// Start starts an embedded server with JetStream and waits until it accepts connections.
func Start(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		cfg.Name = "maint-0"
	}
	opts := &server.Options{
		ServerName: cfg.Name,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true,
		NoLog:      true,
		SyncAlways: cfg.SyncAlways,
		// Commands are small; this leaves room for an oversized one to reach the handler and be
		// rejected with a clear outcome instead of being refused at the door.
		MaxPayload:      1 << 20,
		PingInterval:    PingInterval,
		MaxPingsOut:     PingMax,
		Nkeys:           cfg.Nkeys,
		JetStreamDomain: cfg.Domain,
	}
	clientTLS(opts, cfg.TLS)
	if err := leafOptions(opts, cfg); err != nil {
		return nil, err
	}
	if err := listenOptions(opts, cfg); err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded: new server: %w", err)
	}
	if cfg.Logger != nil {
		s.SetLogger(cfg.Logger, false, false)
	}
	go s.Start()
	wait := cmp.Or(cfg.ReadyTimeout, readyTimeout)
	if !s.ReadyForConnections(wait) {
		s.Shutdown()
		return nil, fmt.Errorf("%w after %s", ErrNotReady, wait)
	}
	return &Server{Server: s, listens: cfg.Listen != ""}, nil
}

// listenOptions sets where the server listens for clients (nowhere without cfg.Listen) and
// for monitoring.
func listenOptions(opts *server.Options, cfg Config) error {
	if cfg.Listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := splitHostPort(cfg.Listen)
		if err != nil {
			return err
		}
		if port == 0 {
			port = server.RANDOM_PORT // nats-server reads 0 as its default port, 4222
		}
		opts.Host, opts.Port = host, port
	}
	if cfg.Monitor != "" {
		host, port, err := splitHostPort(cfg.Monitor)
		if err != nil {
			return err
		}
		if port == 0 {
			port = -1 // nats-server's "any free port" for monitoring
		}
		opts.HTTPHost, opts.HTTPPort = host, port
	}
	return nil
}

// Connect opens an in-process client connection (no TCP, and no TLS even when the server has
// it). On a server with Nkeys, pass the user's credentials (nats.Nkey, nats.NkeyOptionFromSeed).
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.InProcessServer(s.Server), nats.MaxReconnects(-1)}, opts...)
	nc, err := nats.Connect(s.InProcessURL(), opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded: connect: %w", err)
	}
	return nc, nil
}

// InProcessURL is the URL to pass to nats.Connect with nats.InProcessServer(s.Server): always
// nats://. A tls:// URL makes the client insist on a TLS handshake, which an in-process
// connection does not need and which stalls for about a minute before it fails on the
// certificate (the server's name is 0.0.0.0 or its listen address).
func (s *Server) InProcessURL() string {
	u, err := url.Parse(s.ClientURL())
	if err != nil {
		return "nats://127.0.0.1:4222" // only the scheme matters in-process
	}
	u.Scheme = "nats"
	return u.String()
}

// URL is the address clients in other processes use (tls:// when the server has TLS); ""
// when the server does not listen.
func (s *Server) URL() string {
	if !s.listens {
		return ""
	}
	return s.ClientURL()
}

// MonitorURL is the base URL of the monitoring endpoint (http://host:port), "" when the
// server has none.
func (s *Server) MonitorURL() string {
	if a := s.MonitorAddr(); a != nil {
		return "http://" + a.String()
	}
	return ""
}

// Stop shuts the server down and waits for it to finish.
func (s *Server) Stop() {
	s.Shutdown()
	s.WaitForShutdown()
}

func splitHostPort(hp string) (string, int, error) {
	host, p, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, fmt.Errorf("embedded: listen address %q: %w", hp, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("embedded: listen address %q: bad port", hp)
	}
	return host, port, nil
}
