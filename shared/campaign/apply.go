package campaign

import (
	"time"

	"maintsignals/shared/campaignspec"
	"maintsignals/shared/domain"
)

// Apply decides a campaign command: the campaign's new state (nil while none exists), what to
// publish, or why the command is refused. c is nil when the campaign does not exist; t is the
// tally of its entities as they stand. Actions that change nothing (resume an active campaign,
// approve a wave without a gate, retry a phase no entity is in) are applied with no effect.
//   - create: a new campaign, planning (the function then plans and calls Activate); the same
//     spec again (its digest) is Duplicate; another spec is InvalidParameter, "spec".
//   - pause: active or halted → paused, announcing nothing new; with withdraw, a new
//     generation, and Step withdraws what is announced and not started.
//   - resume: paused or halted → active; the waves whose failures passed their threshold are
//     waived. Step plans again what would now start sooner than the notice.
//   - cancel: → cancelled, final; Step cancels what is planned and withdraws what is announced.
//   - retry: a new generation in which the entities in the phase are planned anew; a completed
//     campaign is active again.
//   - approve: opens a manual gate (the wave starts once the waves before it are finished).
//
// Completed and cancelled campaigns refuse pause, resume and cancel (RequestNotAllowed,
// "action"), except that cancelling a cancelled campaign changes nothing; cancelled ones
// refuse retry.
func Apply(c *Campaign, cmd Control, t Tally, at time.Time) (*Campaign, Effects, *domain.Rejection) {
	if cmd.Action == ActionCreate {
		return create(c, cmd.compiled, at)
	}
	if c == nil {
		return nil, Effects{}, notAllowed("there is no campaign %s", cmd.Campaign)
	}
	if c.Status == StatusPlanning {
		return c, Effects{}, notAllowed("campaign %s is being planned", c.ID)
	}
	n := c.clone()
	var out []Event
	var rej *domain.Rejection
	phases := t.Total()
	switch cmd.Action {
	case ActionPause:
		out, rej = n.pause(cmd.Withdraw, phases, at)
	case ActionResume:
		out, rej = n.resume(t, at)
	case ActionCancel:
		out, rej = n.cancel(phases, at)
	case ActionRetry:
		out, rej = n.retry(cmd.Phase, phases, at)
		t = retriedTally(t, cmd.Phase) // what Step is about to make of it
	case ActionApprove:
		out, rej = n.approve(cmd.Wave, phases, at)
	default:
		rej = domain.InvalidParameter("action", "unknown action %q", cmd.Action)
	}
	if rej != nil {
		return c, Effects{}, rej
	}
	if len(out) == 0 {
		return c, Effects{}, nil
	}
	n.UpdatedAt = at
	n, more := n.advance(t, at)
	return n, Effects{Events: append(out, more...)}, nil
}

func create(c *Campaign, s *campaignspec.Spec, at time.Time) (*Campaign, Effects, *domain.Rejection) {
	if s == nil {
		return c, Effects{}, domain.InvalidParameter("spec", "is required with create")
	}
	if c != nil {
		if c.Digest == s.Digest() {
			return c, Effects{Duplicate: true}, nil
		}
		return c, Effects{}, domain.InvalidParameter("spec", "campaign %s exists with another spec (digest %s, this one %s); choose another id", c.ID, c.Digest[:12], s.Digest()[:12])
	}
	return NewCampaign(s, at), Effects{}, nil
}

func (c *Campaign) pause(withdraw bool, phases Counts, at time.Time) ([]Event, *domain.Rejection) {
	switch c.Status {
	case StatusCompleted, StatusCancelled:
		return nil, notAllowed("campaign %s is %s", c.ID, c.Status)
	case StatusPaused:
		if !withdraw || c.Withdraw {
			return nil, nil
		}
	}
	c.Status = StatusPaused
	if withdraw && !c.Withdraw {
		c.Withdraw = true
		c.Generation++ // what is withdrawn is announced again under new ids
	}
	return c.emit(nil, EventPaused, phases, at), nil
}

func (c *Campaign) resume(t Tally, at time.Time) ([]Event, *domain.Rejection) {
	switch c.Status {
	case StatusCompleted, StatusCancelled:
		return nil, notAllowed("campaign %s is %s", c.ID, c.Status)
	case StatusActive:
		return nil, nil
	}
	for i, w := range c.spec.Waves {
		if c.Waves[i].Opened && w.Threshold.Exceeded(t.Waves[i].Of(PhaseFailed), t.Waves[i].Total()) {
			c.Waves[i].Waived = true
		}
	}
	c.Status, c.Withdraw = StatusActive, false
	return c.emit(nil, EventResumed, t.Total(), at), nil
}

func (c *Campaign) cancel(phases Counts, at time.Time) ([]Event, *domain.Rejection) {
	switch c.Status {
	case StatusCompleted:
		return nil, notAllowed("campaign %s is completed: nothing is left to cancel", c.ID)
	case StatusCancelled:
		return nil, nil
	}
	c.Status, c.Withdraw = StatusCancelled, false
	return c.emit(nil, EventCancelled, phases, at), nil
}

func (c *Campaign) retry(p Phase, phases Counts, at time.Time) ([]Event, *domain.Rejection) {
	if c.Status == StatusCancelled {
		return nil, notAllowed("campaign %s is cancelled", c.ID)
	}
	if phases.Of(p) == 0 {
		return nil, nil
	}
	c.Generation++
	c.Retries = append(c.Retries, Retry{Phase: p, Generation: c.Generation})
	if c.Status == StatusCompleted {
		c.Status = StatusActive
	}
	c.Finished = false
	out := c.emit(nil, EventRetried, phases, at)
	out[0].Phase = p
	return out, nil
}

// retriedTally is t with the entities in phase p planned, as the retry plans them.
func retriedTally(t Tally, p Phase) Tally {
	t = t.Clone()
	for i := range t.Waves {
		t.Waves[i].Add(PhasePlanned, t.Waves[i].Of(p))
		t.Waves[i].Add(p, -t.Waves[i].Of(p))
	}
	t.NoWave.Add(PhasePlanned, t.NoWave.Of(p))
	t.NoWave.Add(p, -t.NoWave.Of(p))
	return t
}

func (c *Campaign) approve(name string, phases Counts, at time.Time) ([]Event, *domain.Rejection) {
	i, ok := c.spec.WaveIndex(name)
	if !ok {
		return nil, domain.InvalidParameter("wave", "campaign %s has no wave %q", c.ID, domain.Truncate(name, 64))
	}
	if !c.spec.Waves[i].Manual || c.Waves[i].Approved {
		return nil, nil
	}
	c.Waves[i].Approved = true
	out := c.emit(nil, EventApproved, phases, at)
	out[0].Wave = name
	return out, nil
}

// Activate ends the planning of a created campaign whose entities, tallied in t, are stored:
// it is active, the created event goes out, and Advance runs.
func Activate(c *Campaign, t Tally, at time.Time) (*Campaign, Effects) {
	if c.Status != StatusPlanning {
		return c, Effects{}
	}
	n := c.clone()
	n.Status, n.Entities, n.UpdatedAt = StatusActive, t.Total().Total(), at
	out := n.emit(nil, EventCreated, t.Total(), at)
	n, more := n.advance(t, at)
	return n, Effects{Events: append(out, more...)}
}

// Advance moves the campaign on by its entities' tally t: it halts when an open wave's failed
// entities pass its threshold; opens the next wave when every earlier wave is finished and
// its gate approved; reports each tenth of the selection done, once in the campaign's life;
// and reports completed when every entity is finished (the status stays cancelled for a
// cancelled campaign). The function calls it whenever phases changed.
func Advance(c *Campaign, t Tally, at time.Time) (*Campaign, Effects) {
	if c.Status == StatusPlanning {
		return c, Effects{}
	}
	n, out := c.clone().advance(t, at)
	if len(out) == 0 && wavesEqual(n.Waves, c.Waves) {
		return c, Effects{}
	}
	n.UpdatedAt = at
	return n, Effects{Events: out}
}

func wavesEqual(a, b []WaveState) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
