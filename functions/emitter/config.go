package emitter

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
)

// Defaults.
const (
	DefaultRetention     = 24 * time.Hour
	DefaultExportTimeout = 30 * time.Second
	// DefaultBatchSize is the data points of one request: with resource IDs of typical
	// length a request stays near 2 MB, half of a collector's default 4 MiB gRPC limit.
	DefaultBatchSize = 10000
	// DefaultMaxRequestBytes caps a request's estimated size, so that unusually long
	// resource IDs (up to 512 bytes) cannot push a full batch over 4 MiB.
	DefaultMaxRequestBytes = 3 << 20
)

// ErrInvalidConfig is wrapped by configuration errors.
var ErrInvalidConfig = errors.New("invalid emitter config")

// Config configures the emitter. Zero fields take the defaults.
type Config struct {
	// Retention is how long an entity in None keeps being emitted after its stateSince.
	Retention time.Duration
	// StuckAfter is how long an update may run before cluster.maintenance.stuck counts it
	// (default domain.DefaultStuckAfter; the notices function's stuck notice uses the same).
	StuckAfter time.Duration
	// PUCM adds the ARO-RP compatible cluster.maintenance.pucm metric.
	PUCM bool
	// Tick is the schedule's interval, if known (maintctl knows it). It sets the default
	// ExportTimeout and forbids one that would outlast the tick.
	Tick time.Duration
	// ExportTimeout bounds one run: the scan and every request. It must stay below the tick,
	// so that a collector that is down or slow never delays the next tick. Default: 30s,
	// or three quarters of a shorter Tick.
	ExportTimeout time.Duration
	// BatchSize is the most data points in one request. An entity's points always travel
	// together, so a request may hold a few points fewer.
	BatchSize int
	// MaxRequestBytes caps the estimated encoded size of one request.
	MaxRequestBytes int
	// Now is the clock for point timestamps and retention (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// withDefaults fills zero fields and validates the result.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Retention < 0:
		return c, fmt.Errorf("%w: Retention must not be negative, got %s", ErrInvalidConfig, c.Retention)
	case c.StuckAfter < 0:
		return c, fmt.Errorf("%w: StuckAfter must not be negative, got %s", ErrInvalidConfig, c.StuckAfter)
	case c.Tick < 0:
		return c, fmt.Errorf("%w: Tick must not be negative, got %s", ErrInvalidConfig, c.Tick)
	case c.ExportTimeout < 0:
		return c, fmt.Errorf("%w: ExportTimeout must not be negative, got %s", ErrInvalidConfig, c.ExportTimeout)
	case c.BatchSize < 0:
		return c, fmt.Errorf("%w: BatchSize must not be negative, got %d", ErrInvalidConfig, c.BatchSize)
	case c.MaxRequestBytes < 0:
		return c, fmt.Errorf("%w: MaxRequestBytes must not be negative, got %d", ErrInvalidConfig, c.MaxRequestBytes)
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.StuckAfter == 0 {
		c.StuckAfter = domain.DefaultStuckAfter
	}
	if c.ExportTimeout == 0 {
		c.ExportTimeout = function.WithinTick(DefaultExportTimeout, c.Tick)
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.BatchSize < pointsPerEntity+1:
		// Room for one entity: fewer could never send anything.
		return c, fmt.Errorf("%w: BatchSize must be at least %d points, got %d", ErrInvalidConfig, pointsPerEntity+1, c.BatchSize)
	case c.MaxRequestBytes < 64<<10:
		return c, fmt.Errorf("%w: MaxRequestBytes must be at least 64 KiB, got %d", ErrInvalidConfig, c.MaxRequestBytes)
	case c.ExportTimeout < 100*time.Millisecond:
		return c, fmt.Errorf("%w: ExportTimeout must be at least 100ms, got %s", ErrInvalidConfig, c.ExportTimeout)
	case c.Tick > 0 && c.ExportTimeout >= c.Tick:
		return c, fmt.Errorf("%w: ExportTimeout %s must be shorter than the Tick %s", ErrInvalidConfig, c.ExportTimeout, c.Tick)
	}
	return c, nil
}
