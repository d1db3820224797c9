// Package admin serves a function's health endpoints for its platform: /livez (the process
// is alive), /readyz (it can take work now) and, when wanted, /metrics.
//
// Liveness never looks at NATS: a restart does not bring a lost server back, and restarting
// every replica during a NATS outage would only add a cold start to the recovery. Readiness
// does: a replica that is disconnected, whose consumers are gone or that is draining answers
// 503, so that the platform routes nothing to it and a rollout waits for it.
package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/function"
)

// Config configures the admin endpoints.
type Config struct {
	// Listen is host:port (":8081" in a pod).
	Listen string
	// Status is what the functions of the process report (function.WithStatus).
	Status *function.Status
	// Conn and JS are the functions' connection: readiness checks it and looks the consumers
	// up. They may come later (Attach): liveness is served while the first connection is
	// still being tried, so that a NATS that starts late does not get the pod restarted.
	Conn *nats.Conn
	JS   jetstream.JetStream
	// Metrics, when set, is served on /metrics (or later, SetMetrics).
	Metrics http.Handler
	Logger  *slog.Logger
}

// Server is a running admin endpoint.
type Server struct {
	cfg  Config
	srv  *http.Server
	addr string

	mu      sync.Mutex
	conn    *nats.Conn
	js      jetstream.JetStream
	metricz http.Handler
}

// checkTimeout bounds the consumer look-ups of one readiness check.
const checkTimeout = 2 * time.Second

// Start listens at once (an address in use fails here, not later) and serves in the
// background until Close.
func Start(cfg Config) (*Server, error) {
	if cfg.Status == nil {
		return nil, errors.New("admin: Status is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("admin listen %s: %w", cfg.Listen, err)
	}
	s := &Server{cfg: cfg, addr: ln.Addr().String(), conn: cfg.Conn, js: cfg.JS, metricz: cfg.Metrics}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "alive")
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /metrics", s.metrics)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Logger.Error("admin endpoint stopped", "addr", s.addr, "error", err)
		}
	}()
	return s, nil
}

// Attach gives readiness the functions' connection once it is made.
func (s *Server) Attach(conn *nats.Conn, js jetstream.JetStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn, s.js = conn, js
}

// SetMetrics serves h on /metrics (nil: 404, metrics go elsewhere).
func (s *Server) SetMetrics(h http.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.metricz = h
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.metricz
	s.mu.Unlock()
	if h == nil {
		writeText(w, http.StatusNotFound, "no Prometheus page here: metrics go over OTLP, or start with --metrics-listen")
		return
	}
	h.ServeHTTP(w, r)
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.addr }

// Close stops serving.
func (s *Server) Close(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// Ready reports whether the process can take work now, and why not.
func (s *Server) Ready(ctx context.Context) error {
	s.mu.Lock()
	conn, js := s.conn, s.js
	s.mu.Unlock()
	if conn == nil || js == nil {
		return errors.New("not connected to NATS yet")
	}
	if st := conn.Status(); st != nats.CONNECTED {
		return fmt.Errorf("not connected to NATS (%s)", strings.ToLower(st.String()))
	}
	fns := s.cfg.Status.Functions()
	if len(fns) == 0 {
		return errors.New("starting: no function serves yet")
	}
	for _, f := range fns {
		switch {
		case f.Draining:
			return fmt.Errorf("function %s is draining", f.Name)
		case !f.Serving:
			return fmt.Errorf("function %s is starting", f.Name)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	for _, f := range fns {
		for _, c := range f.Consumers {
			if _, err := js.Consumer(ctx, f.Stream, c); err != nil {
				if errors.Is(err, jetstream.ErrConsumerNotFound) {
					return fmt.Errorf("consumer %s/%s not found (run maintctl provision)", f.Stream, c)
				}
				return fmt.Errorf("consumer %s/%s: %w", f.Stream, c, err)
			}
		}
	}
	return nil
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.Ready(r.Context()); err != nil {
		writeText(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
		return
	}
	writeText(w, http.StatusOK, "ready")
}

func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = fmt.Fprintln(w, body)
}
