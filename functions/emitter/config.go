package emitter

import (
	"cmp"
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
	// PlantLeak is a test switch, off in every deployment: each tick's run of shard 0 starts a
	// goroutine that never ends, so that the soak (test/soak -plant-leak) can show that it
	// catches a leak.
	PlantLeak bool
	// Region, when set, is the region this deployment is (README, Regions): each run then
	// publishes its shards' parts of the region's summary, which the hub sources.
	Region string
	// Now is the clock for point timestamps and retention (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// stale is how long a shard's last run is reported (coverage, and its points on the
// Prometheus page) without a newer one: two ticks and a run, after which the shard is
// presumably another replica's.
func (c Config) stale() time.Duration {
	return 2*cmp.Or(c.Tick, time.Minute) + c.ExportTimeout
}

// gatherWindow is how long the first shard of a tick waits for the other shards this replica
// holds, so that they share one read of the bucket: they arrive within milliseconds.
func (c Config) gatherWindow() time.Duration { return min(100*time.Millisecond, c.ExportTimeout/20) }

// withDefaults fills zero fields and validates the result.
func (c Config) withDefaults() (Config, error) {
	if err := cmp.Or(
		function.NotNegative(ErrInvalidConfig, "Retention", c.Retention),
		function.NotNegative(ErrInvalidConfig, "StuckAfter", c.StuckAfter),
		function.NotNegative(ErrInvalidConfig, "Tick", c.Tick),
		function.NotNegative(ErrInvalidConfig, "ExportTimeout", c.ExportTimeout),
		function.NotNegative(ErrInvalidConfig, "BatchSize", c.BatchSize),
		function.NotNegative(ErrInvalidConfig, "MaxRequestBytes", c.MaxRequestBytes),
	); err != nil {
		return c, err
	}
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	c.StuckAfter = cmp.Or(c.StuckAfter, domain.DefaultStuckAfter)
	c.ExportTimeout = cmp.Or(c.ExportTimeout, function.WithinTick(DefaultExportTimeout, c.Tick))
	c.BatchSize = cmp.Or(c.BatchSize, DefaultBatchSize)
	c.MaxRequestBytes = cmp.Or(c.MaxRequestBytes, DefaultMaxRequestBytes)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Region != "" {
		if err := domain.ValidRegion(c.Region); err != nil {
			return c, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
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
