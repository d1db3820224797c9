package campaign

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	core "maintsignals/shared/campaign"
	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/campaignstore"
	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// pass is one pass over the entities of a campaign: observe, step, re-plan, publish, write,
// count, move the campaign on.
type pass struct {
	f    *Function
	c    *core.Campaign
	rev  uint64
	set  core.Settings
	pol  core.Policies
	now  time.Time
	upTo core.Cursor // the outcome events read, up to these sequences

	ents     []campaignstore.Stored // by key
	index    map[string]int
	loaded   []core.Entity // each entity as read
	observed []core.Entity // each entity once its events are observed, before it is stepped
	lastSeen []uint64      // the last outcome event of each entity read in this pass
	cmds     []command

	// incomplete: some entity could not be written; the campaign keeps its events cursor
	// and its retries (the next pass sees them again).
	incomplete bool
}

// command is a command a step decided, for the entity at index i.
type command struct {
	i   int
	cmd admission.Command
}

// errMoved ends a pass whose campaign changed (paused, cancelled) while it was deciding.
var errMoved = errors.New("the campaign changed during the pass")

// runPass makes a pass over campaign id with the outcome events read for it.
func (f *Function) runPass(ctx context.Context, id string, evs []observed, upTo core.Cursor, pol core.Policies, now time.Time) error {
	c, rev, err := f.store.Campaign(ctx, id)
	if err != nil {
		return err
	}
	if c, rev, err = f.flush(ctx, c, rev); err != nil || c == nil || c.Status == core.StatusPlanning {
		return err
	}
	if c.Legacy() {
		// Stored by the first layout: it observed everything up to its stop, and reads the
		// cells' streams from now on (the events moved into them are its past).
		last, err := f.lastEventSeqs(ctx)
		if err != nil {
			return err
		}
		c.Read, c.EventsSeq = last, 0
		if rev, err = f.store.Save(ctx, c, rev); err != nil {
			return err
		}
		upTo = upTo.Max(last)
	}
	evs = slices.DeleteFunc(slices.Clone(evs), func(o observed) bool { return o.seq <= c.Read[domain.CellOf(o.key)] })
	if c.Finished && len(c.Retries) == 0 {
		return f.observeOnly(ctx, c, rev, evs, upTo.Max(c.Read), now)
	}
	p := &pass{f: f, c: c, rev: rev, set: f.cfg.settings(), pol: pol, now: now, upTo: upTo.Max(c.Read), index: map[string]int{}}
	if err := p.load(ctx); err != nil {
		return err
	}
	p.observe(ctx, evs)
	p.step(nil)
	p.step(p.replan()) // what got a window may be due at once
	if err := p.publish(ctx); err != nil {
		if errors.Is(err, errMoved) {
			f.log.Info("campaign changed during the pass; the next pass carries on", "campaign", id)
			f.kick(id)
			return nil
		}
		return err
	}
	if err := p.write(ctx); err != nil {
		return err
	}
	return p.finish(ctx)
}

// load reads every entity of the campaign, by key.
func (p *pass) load(ctx context.Context) error {
	err := p.f.store.Entities(ctx, p.c.ID, func(s campaignstore.Stored) error {
		p.ents = append(p.ents, s)
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(p.ents, func(a, b campaignstore.Stored) int { return strings.Compare(a.Key, b.Key) })
	p.loaded, p.lastSeen = make([]core.Entity, len(p.ents)), make([]uint64, len(p.ents))
	for i, s := range p.ents {
		p.index[s.Key], p.loaded[i] = i, s.Entity
	}
	return nil
}

// observe applies the outcome events, in stream order; an entity skips those it observed
// before (a pass cut short reads them again).
func (p *pass) observe(ctx context.Context, evs []observed) {
	for _, o := range evs {
		i, ok := p.index[o.key]
		if !ok {
			continue // not one of the campaign's
		}
		p.lastSeen[i] = o.seq
		e := p.ents[i].Entity
		if o.seq <= e.EventSeq {
			continue
		}
		p.ents[i].Entity = p.f.observe(ctx, p.c, p.set, o, e)
	}
	p.observed = make([]core.Entity, len(p.ents))
	for i := range p.ents {
		p.observed[i] = p.ents[i].Entity
	}
}

// observe is what an outcome event does to an entity: campaign.Observe, and for a customer's
// reschedule, the window the record holds now.
func (f *Function) observe(ctx context.Context, c *core.Campaign, set core.Settings, o observed, e core.Entity) core.Entity {
	n := core.Observe(c, set, o.key, e, o.ev)
	if o.ev.Task == domain.TaskReschedule && o.ev.Outcome == domain.OutcomeApplied && o.ev.Campaign != nil &&
		o.ev.Campaign.ID == c.ID && o.ev.Campaign.Generation == e.Generation {
		if r, _, err := f.records.Get(ctx, o.key); err == nil && r.Window != nil {
			w := *r.Window
			n.Window = &w
		}
	}
	return n
}

// step steps the entities at idx (nil: every entity), keeping the commands it decides.
func (p *pass) step(idx []int) {
	if idx == nil {
		idx = make([]int, len(p.ents))
		for i := range idx {
			idx[i] = i
		}
	}
	for _, i := range idx {
		s := &p.ents[i]
		var pol *policy.Policy
		if p.pol != nil {
			pol = p.pol(s.Key)
		}
		var fx core.Effects
		s.Entity, fx = core.Step(p.c, p.set, s.Key, s.Entity, p.set.Notice(pol), p.now)
		for _, cmd := range fx.Commands {
			p.cmds = append(p.cmds, command{i: i, cmd: cmd})
		}
	}
}

// replan gives a window to the entities that need one, around the windows the others hold,
// and returns those it planned (an empty, non-nil list when none).
func (p *pass) replan() []int {
	planned := []int{}
	if !slices.ContainsFunc(p.ents, func(s campaignstore.Stored) bool { return s.Entity.NeedsPlan() }) {
		return planned
	}
	keyed := make([]core.Keyed, len(p.ents))
	for i, s := range p.ents {
		keyed[i] = core.Keyed{Key: s.Key, Entity: s.Entity}
	}
	for _, k := range core.Replan(p.c.Compiled(), p.set, p.now, keyed, p.pol) {
		i := p.index[k.Key]
		p.ents[i].Entity = k.Entity
		if k.Entity.Window != nil {
			planned = append(planned, i)
		}
	}
	return planned
}

// sameEntity reports whether two entities are the same, windows by value.
func sameEntity(a, b core.Entity) bool {
	aw, bw := a.Window, b.Window
	a.Window, b.Window = nil, nil
	if a != b || (aw == nil) != (bw == nil) {
		return false
	}
	return aw == nil || aw.Start.Equal(bw.Start) && aw.End.Equal(bw.End)
}

// finish counts the phases and moves the campaign on: its counts, its events cursor, the
// retries it stepped, what Advance decides, in one write.
func (p *pass) finish(ctx context.Context) error {
	s := p.c.Compiled()
	t := core.NewTally(s)
	for _, e := range p.ents {
		t.Add(e.Entity.Wave, e.Entity.Phase)
	}
	gen := p.c.Generation
	return p.f.settle(ctx, p.c, p.rev, t, p.now, func(n *core.Campaign) *core.Campaign {
		if p.incomplete {
			return n
		}
		n.Read = n.Read.Max(p.upTo)
		return n.Swept(gen)
	})
}

// settle writes the campaign with its entities counted in t: Advance, then more (nil: no
// more), again on a fresh read when another decision wrote it meanwhile. Nothing is written
// when nothing changed.
func (f *Function) settle(ctx context.Context, c *core.Campaign, rev uint64, t core.Tally, now time.Time, more func(*core.Campaign) *core.Campaign) error {
	for range maxConflicts {
		n, fx := core.Advance(c, t, now)
		m := *n
		m.Tally = t
		if more != nil {
			m = *more(&m)
		}
		if len(fx.Events) == 0 && sameStored(c, &m) {
			return nil
		}
		evs, err := core.Messages(fx.Events)
		if err != nil {
			return err
		}
		m.Outbox = append(slices.Clip(m.Outbox), evs...)
		newRev, err := f.store.Save(ctx, &m, rev)
		if errors.Is(err, campaignstore.ErrConflict) {
			if c, rev, err = f.store.Campaign(ctx, c.ID); err != nil {
				return err
			}
			if c, rev, err = f.flush(ctx, c, rev); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		_, _, err = f.flush(ctx, &m, newRev)
		return err
	}
	return fmt.Errorf("campaign %s kept changing: %w", c.ID, campaignstore.ErrConflict)
}

// sameStored reports whether two campaigns would be stored alike.
func sameStored(a, b *core.Campaign) bool {
	x, err1 := a.Encode()
	y, err2 := b.Encode()
	return err1 == nil && err2 == nil && string(x) == string(y)
}
