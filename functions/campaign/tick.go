package campaign

import (
	"context"
	"errors"
	"fmt"
	"time"

	core "maintsignals/shared/campaign"
	"maintsignals/shared/campaignstore"
	"maintsignals/shared/function"
)

// HandleTick makes a pass over every campaign and exports the burndown. It always
// acknowledges the tick: the next tick is the retry of a pass that failed.
func (f *Function) HandleTick(ctx context.Context, msg function.Message) error {
	if msg.Pending > 0 {
		f.health.record(ctx, outcomeSkipped, 0)
		return nil // a newer tick is waiting
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	start := time.Now()
	err := f.tick(ctx, f.cfg.Now().UTC())
	if err != nil {
		f.log.Warn("campaign pass incomplete; the next tick carries on", "err", err)
		f.health.record(ctx, outcomeFailure, time.Since(start))
		return nil
	}
	f.health.record(ctx, outcomeSuccess, time.Since(start))
	return nil
}

// tick reads the outcome events of every campaign's entities once, then makes a pass over
// each campaign, then exports the burndown of every campaign as stored.
func (f *Function) tick(ctx context.Context, now time.Time) error {
	ids, err := f.store.IDs(ctx)
	if err != nil {
		return err
	}
	var from core.Cursor
	any := false
	for _, id := range ids {
		c, _, err := f.store.Campaign(ctx, id)
		if err != nil {
			return err
		}
		if c != nil && c.Status != core.StatusPlanning {
			if !any {
				from = c.Read
			}
			from, any = from.Min(c.Read), true
		}
	}
	var errs []error
	if any {
		errs = append(errs, f.passes(ctx, ids, from, now))
	}
	errs = append(errs, f.export(ctx, ids, now))
	return errors.Join(errs...)
}

// passes makes a pass over each campaign with the outcome events read from cursor from.
func (f *Function) passes(ctx context.Context, ids []string, from core.Cursor, now time.Time) error {
	outs, err := f.readOutcomes(ctx, from)
	if err != nil {
		return err
	}
	pol, err := f.policies.Load(ctx, f.js)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if err := f.runPass(ctx, id, outs.byCampaign[id], outs.upTo, pol, now); err != nil {
			errs = append(errs, fmt.Errorf("campaign %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// kick asks for a pass over campaign id at once (after a command changed it).
func (f *Function) kick(id string) {
	select {
	case f.kicks <- id:
	default: // passes are waiting already; the tick covers the rest
	}
}

// ServeKicks makes the passes asked for after campaign commands, one at a time, until ctx
// ends (Run serves them; a test that drives the function by hand does).
func (f *Function) ServeKicks(ctx context.Context) {
	for {
		var id string
		select {
		case <-ctx.Done():
			return
		case id = <-f.kicks:
		}
		f.mu.Lock()
		if err := f.passOne(ctx, id, f.cfg.Now().UTC()); err != nil && ctx.Err() == nil {
			f.log.Warn("campaign pass incomplete; the next tick carries on", "campaign", id, "err", err)
		}
		f.mu.Unlock()
	}
}

// passOne makes a pass over one campaign, reading its outcome events.
func (f *Function) passOne(ctx context.Context, id string, now time.Time) error {
	c, _, err := f.store.Campaign(ctx, id)
	if err != nil || c == nil || c.Status == core.StatusPlanning {
		return err
	}
	outs, err := f.readOutcomes(ctx, c.Read)
	if err != nil {
		return err
	}
	pol, err := f.policies.Load(ctx, f.js)
	if err != nil {
		return err
	}
	return f.runPass(ctx, id, outs.byCampaign[id], outs.upTo, pol, now)
}

// observeOnly applies the outcome events of a finished campaign to its entities one by one:
// nothing is left to step, so its entities are not all read.
func (f *Function) observeOnly(ctx context.Context, c *core.Campaign, rev uint64, evs []observed, upTo core.Cursor, now time.Time) error {
	t := c.Tally.Clone()
	set := f.cfg.settings()
	for _, o := range evs {
		if err := f.observeOne(ctx, c, set, o, &t); err != nil {
			return err // the cursor stays: the next pass reads these events again
		}
	}
	return f.settle(ctx, c, rev, t, now, func(n *core.Campaign) *core.Campaign {
		n.Read = n.Read.Max(upTo)
		return n
	})
}

// observeOne applies one outcome event to its entity, over the revision it read.
func (f *Function) observeOne(ctx context.Context, c *core.Campaign, set core.Settings, o observed, t *core.Tally) error {
	for range maxConflicts {
		s, ok, err := f.store.Entity(ctx, c.ID, o.key)
		if err != nil || !ok || o.seq <= s.Entity.EventSeq {
			return err
		}
		n := f.observe(ctx, c, set, o, s.Entity)
		if sameEntity(n, s.Entity) {
			return nil
		}
		n.EventSeq = o.seq
		err = f.store.PutEntity(ctx, c.ID, o.key, n, s.Revision)
		if errors.Is(err, campaignstore.ErrConflict) {
			continue
		}
		if err == nil {
			t.Move(n.Wave, s.Entity.Phase, n.Phase)
		}
		return err
	}
	return fmt.Errorf("entity %s of campaign %s kept changing: %w", o.key, c.ID, campaignstore.ErrConflict)
}
