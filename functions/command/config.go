package command

import (
	"cmp"
	"errors"
	"log/slog"
	"regexp"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/signing"
	"maintsignals/shared/store"
)

// Config configures a replica of the command function. Zero fields take the defaults.
type Config struct {
	// MaxDeliver is the delivery budget before a command is dead-lettered; zero takes the
	// runtime's, function.DefaultMaxDeliver.
	MaxDeliver int
	Log        *slog.Logger
	// Meters provides the function's meters (its own metrics under scopeName, the handler
	// metrics under the runtime's scope); nil: no metrics.
	Meters metric.MeterProvider

	// Auth checks command signatures (nil: unsigned commands are accepted): a *signing.Policy,
	// or a *signing.Watched that follows its signers file.
	Auth Authority
	// MaxCommandAge is how long after issuedAt a signed command is accepted, by the time the
	// stream stored it; zero takes DefaultMaxCommandAge.
	MaxCommandAge time.Duration
	// EntityRate and EntityBurst limit how often one entity's record changes (commands per
	// second by their stored times, and the burst); a command over it is refused without
	// touching the bucket. Zero takes the defaults; a negative rate admits everything.
	EntityRate  float64
	EntityBurst int
	// MinNotice is the notice policy: a Pending whose window starts sooner than this after
	// the command was stored is refused unless forced; 0: no minimum.
	MinNotice time.Duration
	// ResourceIDPattern, when set, refuses commands whose resource ID it does not match
	// (domain.CheckResourceIDPattern).
	ResourceIDPattern *regexp.Regexp

	// ForgetAfter is how long the tombstone a Forget leaves stays in the bucket (then the
	// entity reads as never seen; its history stays in the events): zero takes
	// store.DefaultForgetAfter, a negative value keeps tombstones for ever.
	ForgetAfter time.Duration

	// Deadlines finds the deadline of the campaign whose window a Reschedule moves (nil: the
	// campaigns bucket's, read once per campaign).
	Deadlines Deadlines

	// Records and Events replace the bucket and the event publisher (fault injection in tests).
	Records Records
	Events  Publisher
}

// Default per-entity admission: far above what maintenance of one cluster needs, far below a
// flood.
const (
	DefaultEntityRate  = 20
	DefaultEntityBurst = 200
)

// DefaultMaxCommandAge bounds how long a captured signed command could be replayed.
const DefaultMaxCommandAge = 15 * time.Minute

// A replica's concurrency (commands of different entities of one partition at once) and the
// records it remembers from its own writes (see cache).
const (
	concurrency = 16
	cacheSize   = 16384
)

// scopeName is the instrumentation scope of the command function's own metrics.
const scopeName = "maintsignals/functions/command"

// ErrInvalidConfig is wrapped by configuration errors.
var ErrInvalidConfig = errors.New("invalid command config")

// Authority checks command signatures.
type Authority interface {
	Verify(body []byte, h nats.Header) (*signing.Signer, *domain.Rejection)
	Authorize(s *signing.Signer, c domain.Command) *domain.Rejection
	Requires() bool
}

// withDefaults fills zero fields and validates the result.
func (c Config) withDefaults() (Config, error) {
	if err := cmp.Or(
		function.NotNegative(ErrInvalidConfig, "MaxDeliver", c.MaxDeliver),
		function.NotNegative(ErrInvalidConfig, "MaxCommandAge", c.MaxCommandAge),
		function.NotNegative(ErrInvalidConfig, "EntityBurst", c.EntityBurst),
		function.NotNegative(ErrInvalidConfig, "MinNotice", c.MinNotice),
	); err != nil {
		return c, err
	}
	c.MaxDeliver = cmp.Or(c.MaxDeliver, function.DefaultMaxDeliver)
	c.Log = cmp.Or(c.Log, slog.Default())
	c.Meters = cmp.Or[metric.MeterProvider](c.Meters, noop.NewMeterProvider())
	c.MaxCommandAge = cmp.Or(c.MaxCommandAge, DefaultMaxCommandAge)
	c.ForgetAfter = cmp.Or(c.ForgetAfter, store.DefaultForgetAfter)
	c.EntityRate = cmp.Or(c.EntityRate, DefaultEntityRate)
	c.EntityBurst = cmp.Or(c.EntityBurst, DefaultEntityBurst)
	return c, nil
}
