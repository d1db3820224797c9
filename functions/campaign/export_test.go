package campaign

import (
	"context"

	"github.com/nats-io/nats.go"

	core "maintsignals/shared/campaign"
	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/campaignstore"
)

// What the tests reach inside a replica: where a pass may crash, its passes and its store.

// Hooks are the points where a pass may be made to stop.
type Hooks struct {
	BeforePublish, AfterPublish func(campaign string, commands int) error
}

// SetHooks sets where a pass stops (nil: nowhere).
func (f *Function) SetHooks(h Hooks) {
	f.hooks = hooks{beforePublish: h.BeforePublish, afterPublish: h.AfterPublish}
}

// Passing runs fn while no pass of this replica runs.
func (f *Function) Passing(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

// Store is the replica's campaign store.
func (f *Function) Store() *campaignstore.Store { return f.store }

// Flush publishes a campaign's outbox.
func (f *Function) Flush(ctx context.Context, c *core.Campaign, rev uint64) (*core.Campaign, uint64, error) {
	return f.flush(ctx, c, rev)
}

// CommandMsg is a command as the replica publishes it.
func (f *Function) CommandMsg(key string, c admission.Command) (*nats.Msg, error) {
	return f.commandMsg(key, c)
}

// EventMsg is a campaign event as published.
func EventMsg(subject, campaign string, m core.Message) *nats.Msg {
	return eventMsg(subject, campaign, m)
}
