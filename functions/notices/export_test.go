package notices

import (
	"context"

	"maintsignals/shared/domain"
)

// SetHooks makes the replica call before just before it publishes a notice and after just
// after the stream stored it; an error from either ends that entity's delivery there, as a
// crash would.
func (n *Notifier) SetHooks(before, after func(domain.Notice) error) {
	n.hooks = hooks{beforePublish: before, afterPublish: after}
}

// WithDefaults lets the tests of package notices_test see the defaults New fills in.
func (c Config) WithDefaults() (Config, error) { return c.withDefaults() }

// The pure decision and the run, for the tests of package notices_test.
type Sent = sent

var (
	Decide       = decide
	WindowSeries = windowSeries
	UpdateSeries = updateSeries
	JudgedAt     = judgedAt
)

// RunOnce is one run of the whole bucket (one shard of one), as a tick makes it.
func (n *Notifier) RunOnce(ctx context.Context) (Result, error) {
	return n.runOnce(ctx, n.cfg.Now(), []domain.Shard{{Index: 0, Of: 1}})
}
