// Package embedded runs nats-server with JetStream inside the process: for `maintctl up`,
// local trials and every test that touches NATS (never a mock).
package embedded

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
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
	// ReadyTimeout bounds the wait for the server to accept connections (default 10s).
	ReadyTimeout time.Duration
}

// ErrNotReady is returned when the server does not come up in time.
var ErrNotReady = errors.New("embedded nats-server not ready")

// Server is a running embedded nats-server.
type Server struct {
	*server.Server
	listens bool
}

// Start starts an embedded server with JetStream and waits until it accepts connections.
func Start(cfg Config) (*Server, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("embedded: StoreDir is required")
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
		MaxPayload: 1 << 20,
	}
	if cfg.Listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := splitHostPort(cfg.Listen)
		if err != nil {
			return nil, err
		}
		if port == 0 {
			port = server.RANDOM_PORT // nats-server reads 0 as its default port, 4222
		}
		opts.Host, opts.Port = host, port
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded: new server: %w", err)
	}
	go s.Start()
	timeout := cfg.ReadyTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	if !s.ReadyForConnections(timeout) {
		s.Shutdown()
		return nil, fmt.Errorf("%w after %s", ErrNotReady, timeout)
	}
	return &Server{Server: s, listens: cfg.Listen != ""}, nil
}

// Connect opens a client connection: in-process (no TCP) when possible.
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.InProcessServer(s.Server), nats.MaxReconnects(-1)}, opts...)
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded: connect: %w", err)
	}
	return nc, nil
}

// URL is the address clients in other processes use; "" when the server does not listen.
func (s *Server) URL() string {
	if !s.listens {
		return ""
	}
	return s.ClientURL()
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
