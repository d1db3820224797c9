package campaign

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	core "maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/campaignstore"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
)

// create applies a create: the same spec again is a duplicate and another spec refused
// (campaign.Apply); a new campaign is planned at the command's stored time and written,
// planning, with every entity, then activated. A campaign found still planning (its create
// was cut short) is planned again, as of its creation, and so to the same plan.
func (f *Function) create(ctx context.Context, c *core.Campaign, rev uint64, ctl core.Control, msg function.Message) error {
	s := ctl.Compiled()
	resume := c != nil && c.Status == core.StatusPlanning && c.Digest == s.Digest()
	if c != nil && !resume {
		_, fx, rej := core.Apply(c, ctl, c.Tally, msg.Time)
		o := outcomeOf(ctl, msg, domain.OutcomeRejected, rej, c)
		if rej == nil && fx.Duplicate {
			o = outcomeOf(ctl, msg, domain.OutcomeDuplicate, nil, c)
		}
		return f.commit(ctx, c, rev, o, nil, false)
	}
	at := msg.Time.UTC()
	if resume {
		at = c.CreatedAt
	}
	plan, rej, err := f.plan(ctx, s, at)
	if err != nil {
		return err
	}
	if rej != nil {
		return f.refuse(ctx, s.ID, ctl, msg, rej)
	}
	if !resume {
		if c, rev, err = f.newCampaign(ctx, s, at); err != nil {
			return err
		}
	}
	if err := f.writePlan(ctx, s.ID, plan); err != nil {
		return err
	}
	t := core.NewTally(s)
	for i := range plan.Len() {
		e := plan.Entity(i)
		t.Add(e.Wave, e.Phase)
	}
	n, fx := core.Activate(c, t, at)
	n.Tally = t
	if err := f.commit(ctx, n, rev, outcomeOf(ctl, msg, domain.OutcomeApplied, nil, n), fx.Events, true); err != nil {
		return err
	}
	f.log.Info("campaign created", "campaign", s.ID, "entities", plan.Len(), "planned", plan.Planned())
	f.kick(s.ID)
	return nil
}

// plan plans spec s at at, from its list, the tracked entities under its prefixes and the
// policies as they are now (see Plan).
func (f *Function) plan(ctx context.Context, s *campaignspec.Spec, at time.Time) (*core.Plan, *domain.Rejection, error) {
	var list *core.List
	if s.List != nil {
		var err error
		list, err = campaignstore.ReadList(ctx, f.js, *s.List)
		switch {
		case errors.Is(err, campaignstore.ErrNoList):
			return nil, domain.InvalidParameter("selection.list.object", "%v (upload it first: maintctl campaign create --list FILE does)", err), nil
		case errors.Is(err, core.ErrInvalidList):
			return nil, domain.InvalidParameter("selection.list", "%v", err), nil
		case err != nil:
			return nil, nil, err
		}
	}
	return Plan(ctx, f.js, s, list, &f.policies, f.cfg.settings(), at)
}

// Plan plans spec s at at as the function plans a campaign it creates, from list (nil: none),
// the entities tracked now under its prefixes and the policies as they are now (through
// cache). `maintctl campaign create --dry-run` plans with it, so that a dry run is the plan
// the function would make.
func Plan(ctx context.Context, js jetstream.JetStream, s *campaignspec.Spec, list *core.List, cache *campaignstore.PolicyCache, set core.Settings, at time.Time) (*core.Plan, *domain.Rejection, error) {
	sel, rej, err := campaignstore.Select(ctx, js, s, list)
	if err != nil || rej != nil {
		return nil, rej, err
	}
	pol, err := cache.Load(ctx, js)
	if err != nil {
		return nil, nil, err
	}
	return core.NewPlan(s, sel, pol, set, at), nil, nil
}

// newCampaign writes the campaign, planning; it reads the outcome events stored from now on.
func (f *Function) newCampaign(ctx context.Context, s *campaignspec.Spec, at time.Time) (*core.Campaign, uint64, error) {
	c := core.NewCampaign(s, at)
	last, err := f.lastEventSeqs(ctx)
	if err != nil {
		return nil, 0, err
	}
	c.Read = last
	rev, err := f.store.Save(ctx, c, 0)
	return c, rev, err
}

// writePlan writes every entity of the plan, many at once.
func (f *Function) writePlan(ctx context.Context, id string, plan *core.Plan) error {
	var failed error
	p := newPipeline(f.js, f.cfg.InFlight, func(_ int, _ *jetstream.PubAck, err error) {
		if err != nil && failed == nil {
			failed = err
		}
	})
	for i := range plan.Len() {
		b, err := core.EncodeEntity(plan.Entity(i))
		if err != nil {
			return err
		}
		m := nats.NewMsg(campaignstore.EntitySubject(id, plan.At(i).Key))
		m.Data = b
		if err := p.add(ctx, i, m); err != nil {
			return err
		}
	}
	if err := p.wait(ctx); err != nil {
		return err
	}
	if failed != nil {
		return fmt.Errorf("write the entities of campaign %s: %w", id, failed)
	}
	return nil
}
