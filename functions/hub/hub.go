// Package hub is the global function of the hub (README, Regions): the view of every region
// from the summaries the hub's stream sources, on the web (/regions, GET /api/v1/regions)
// and as metrics, and the keeper of those sources. Records never come to the hub.
package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/regions"
	"maintsignals/shared/telemetry"
)

// Reader is the regions' view as it is now.
type Reader func(ctx context.Context) (regions.View, error)

// NewReader reads the view from the hub's stream at each call.
func NewReader(js jetstream.JetStream, log *slog.Logger) Reader {
	return func(ctx context.Context) (regions.View, error) {
		return regions.Read(ctx, js, time.Now(), log)
	}
}

// Config configures the hub function.
type Config struct {
	// WebListen is host:port of the /regions page and the API; "" for none.
	WebListen string
	Log       *slog.Logger
	// Ready, when set, is told the web address once it listens.
	Ready func(webAddr string)
}

// Run serves the view and keeps the sources until ctx ends.
func Run(ctx context.Context, js jetstream.JetStream, tel *telemetry.Telemetry, cfg Config) error {
	read := NewReader(js, cfg.Log)
	reg, err := RegisterMetrics(tel.Meter(ScopeName), read)
	if err != nil {
		return err
	}
	defer func() { _ = reg.Unregister() }()
	var srv *http.Server
	addr := ""
	if cfg.WebListen != "" {
		ln, err := net.Listen("tcp", cfg.WebListen)
		if err != nil {
			return fmt.Errorf("hub web: %w", err)
		}
		addr = ln.Addr().String()
		srv = &http.Server{Handler: NewHandler(read, NewRecordReader(js, cfg.Log), cfg.Log), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				cfg.Log.Error("hub web stopped", "err", err)
			}
		}()
	}
	if cfg.Ready != nil {
		cfg.Ready(addr)
	}
	err = (&regions.Keeper{JS: js, Log: cfg.Log}).Run(ctx)
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}
	return err
}
