package campaign

import (
	"cmp"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	core "maintsignals/shared/campaign"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/signing"
	"maintsignals/shared/telemetry"
)

// Config configures a replica of the campaign function. Zero fields take the defaults.
type Config struct {
	// MinNotice is the command function's --min-notice: the plan and the announcements keep
	// the larger of it and an entity's policy's notice.
	MinNotice time.Duration
	// Margin and RetryAfter are the rules' (campaign.Settings; their defaults when 0).
	Margin, RetryAfter time.Duration

	// Auth checks the signatures of campaign commands (nil: unsigned ones are accepted); a
	// signed command must be an admin's.
	Auth Authority
	// MaxCommandAge is how long after issuedAt a signed campaign command is accepted, by the
	// time the stream stored it (default DefaultMaxCommandAge).
	MaxCommandAge time.Duration
	// Signer signs the commands the function sends to entities (nil: unsigned). Its public key
	// goes into the command function's signers file with the role campaign.
	Signer nkeys.KeyPair

	// Tick is the schedule's interval, when known (the status of a campaign function that has
	// not run for three ticks is an alert).
	Tick time.Duration
	// Retention is how long a finished campaign's burndown keeps being exported (default
	// DefaultRetention).
	Retention time.Duration
	// InFlight bounds the publishes out at once (default DefaultInFlight).
	InFlight int

	Now       func() time.Time
	Logger    *slog.Logger
	Meters    metric.MeterProvider
	Telemetry *telemetry.Telemetry // the burndown's emissions; nil: none
}

// Authority checks the signatures of campaign commands.
type Authority interface {
	Verify(body []byte, h nats.Header) (*signing.Signer, *domain.Rejection)
	Requires() bool
}

// Defaults.
const (
	DefaultMaxCommandAge = 15 * time.Minute
	DefaultRetention     = 7 * domain.Day
	DefaultInFlight      = 1024
)

// ErrInvalidConfig is wrapped by configuration errors.
var ErrInvalidConfig = errors.New("invalid campaign config")

func (c Config) withDefaults() (Config, error) {
	if err := cmp.Or(
		function.NotNegative(ErrInvalidConfig, "MinNotice", c.MinNotice),
		function.NotNegative(ErrInvalidConfig, "Margin", c.Margin),
		function.NotNegative(ErrInvalidConfig, "RetryAfter", c.RetryAfter),
		function.NotNegative(ErrInvalidConfig, "MaxCommandAge", c.MaxCommandAge),
		function.NotNegative(ErrInvalidConfig, "Tick", c.Tick),
		function.NotNegative(ErrInvalidConfig, "Retention", c.Retention),
		function.NotNegative(ErrInvalidConfig, "InFlight", c.InFlight),
	); err != nil {
		return c, err
	}
	c.MaxCommandAge = cmp.Or(c.MaxCommandAge, DefaultMaxCommandAge)
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	c.InFlight = cmp.Or(c.InFlight, DefaultInFlight)
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Meters = cmp.Or[metric.MeterProvider](c.Meters, noop.NewMeterProvider())
	return c, nil
}

// settings are the rules' settings.
func (c Config) settings() core.Settings {
	return core.Settings{MinNotice: c.MinNotice, Margin: c.Margin, RetryAfter: c.RetryAfter}
}
