package notices

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
)

// Defaults (README, Time in the signal).
var (
	// DefaultRemind is the reminder ladder: two weeks, one week and one day ahead.
	DefaultRemind = []time.Duration{336 * time.Hour, 168 * time.Hour, 24 * time.Hour}
)

// DefaultRunTimeout bounds one run (the scan and every publish), or three quarters of a shorter
// tick. A run that does not finish leaves the rest to the next tick, which decides again from
// what is stored.
const DefaultRunTimeout = 30 * time.Second

// workers is how many entities' notices are published at once.
const workers = 16

// ErrInvalidConfig is wrapped by configuration errors.
var ErrInvalidConfig = errors.New("invalid notices config")

// Config configures the notices function. Zero fields take the defaults.
type Config struct {
	// Remind is the reminder ladder, lead times before a window's start. nil takes
	// DefaultRemind; an empty, non-nil ladder sends no reminders. Order does not matter.
	Remind []time.Duration
	// StuckAfter is how long an update may run before a stuck notice (default
	// domain.DefaultStuckAfter).
	StuckAfter time.Duration
	// Tick is the schedule's interval, if known; it bounds a run (see DefaultRunTimeout).
	Tick time.Duration
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
	Meters metric.MeterProvider
}

// withDefaults fills zero fields and validates the result. The ladder comes back sorted from
// the longest lead to the shortest, without repeats.
func (c Config) withDefaults() (Config, error) {
	if err := cmp.Or(
		function.NotNegative(ErrInvalidConfig, "StuckAfter", c.StuckAfter),
		function.NotNegative(ErrInvalidConfig, "Tick", c.Tick),
	); err != nil {
		return c, err
	}
	if c.Remind == nil {
		c.Remind = DefaultRemind
	}
	ladder := slices.Clone(c.Remind)
	for _, l := range ladder {
		if l < time.Second || l%time.Second != 0 {
			return c, fmt.Errorf("%w: Remind: a reminder lead must be whole seconds, at least 1s, got %s", ErrInvalidConfig, l)
		}
	}
	slices.SortFunc(ladder, func(a, b time.Duration) int { return int(b/time.Second - a/time.Second) })
	c.Remind = slices.Compact(ladder)
	c.StuckAfter = cmp.Or(c.StuckAfter, domain.DefaultStuckAfter)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Meters = cmp.Or[metric.MeterProvider](c.Meters, noop.NewMeterProvider())
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// runTimeout bounds one run.
func (c Config) runTimeout() time.Duration { return function.WithinTick(DefaultRunTimeout, c.Tick) }

// ParseLadder reads a comma-separated list of lead times ("336h,168h,24h"). An empty string is
// an empty ladder: no reminders.
func ParseLadder(s string) ([]time.Duration, error) {
	out := []time.Duration{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		d, err := domain.ParseDuration(f)
		if err != nil {
			return nil, fmt.Errorf("%w: reminder lead %q: %w", ErrInvalidConfig, f, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// FormatLadder is the inverse of ParseLadder, in days where whole ("14d,7d,1d").
func FormatLadder(l []time.Duration) string {
	parts := make([]string, len(l))
	for i, d := range l {
		parts[i] = domain.FormatDays(d)
	}
	return strings.Join(parts, ",")
}
