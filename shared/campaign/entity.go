package campaign

import (
	"encoding/json"
	"fmt"
	"time"

	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/domain"
)

// Entity is one entity of a campaign as tracked: the value of <id>.<key> in the
// campaign-entities bucket. Step and Observe return a new one; the function writes it after
// it published their effects.
type Entity struct {
	Phase      Phase          `json:"phase"`
	ResourceID string         `json:"resourceId"`
	Generation int            `json:"generation"`
	Window     *domain.Window `json:"window,omitempty"`
	// Reason says why the entity is in its phase when the phase alone does not: the skip's
	// reason, the refusal of its announcement, the error of a failed update.
	Reason string `json:"reason,omitempty"`
	Wave   int    `json:"wave"` // index in the spec's waves; -1 none
	// Withdrawing: the None that withdraws the window was sent; its outcome decides.
	Withdrawing bool `json:"withdrawing,omitempty"`
	// RetryAt: a command refused for a reason that may pass is sent again from then.
	RetryAt time.Time `json:"retryAt,omitzero"`
	// EventSeq is the MAINT_EVENTS sequence of the last outcome event observed: one at or
	// before it is not observed again (the function reads the events again after a crash).
	// (Named apart from the first layout's eventSeq, a sequence of MAINT_EVENTS: an entity
	// stored then starts again from no outcome observed.)
	EventSeq uint64 `json:"cellEventSeq,omitempty"`
}

// NeedsPlan reports whether the entity waits for a window (Replan gives it one).
func (e Entity) NeedsPlan() bool { return e.Phase == PhasePlanned && e.Window == nil }

// EncodeEntity marshals an entity for its bucket.
func EncodeEntity(e Entity) ([]byte, error) { return encode("campaign entity", e) }

// DecodeEntity reads an entity from its bucket.
func DecodeEntity(b []byte) (Entity, error) {
	var e Entity
	if err := json.Unmarshal(b, &e); err != nil {
		return Entity{}, fmt.Errorf("decode campaign entity: %w", err)
	}
	if !e.Phase.Valid() {
		return Entity{}, fmt.Errorf("decode campaign entity: unknown phase %q", e.Phase)
	}
	return e, nil
}

// Step is what time and the campaign's state do to the entity of key, now, with notice the
// notice in force for it (Settings.Notice of its policy). In order:
//   - a retry in effect for its phase plans it anew in the retry's generation (no window:
//     NeedsPlan);
//   - in a cancelled campaign, what is planned or rejected is cancelled, and what is announced
//     (or overdue) and not started is withdrawn;
//   - in a campaign paused with withdraw, what is announced and not started is withdrawn;
//   - an announced entity whose window ended is overdue;
//   - in an active campaign whose wave is open, a planned entity whose window would now start
//     sooner than Margin/2 plus the notice is planned again (no window) — or rejected, if it
//     was waiting out an update in progress; one whose window is due (now ≥ start −
//     announceLead − Margin, and past RetryAt) is announced.
//
// The effects are the commands to send, before the entity is written.
func Step(c *Campaign, set Settings, key string, e Entity, notice time.Duration, now time.Time) (Entity, Effects) {
	e = retried(c, e)
	withdrawable := (e.Phase == PhaseAnnounced || e.Phase == PhaseOverdue) && !e.Withdrawing && !now.Before(e.RetryAt)
	switch {
	case c.Status == StatusCancelled && (e.Phase == PhasePlanned || e.Phase == PhaseRejected):
		e.Phase, e.Reason, e.RetryAt = PhaseCancelled, "campaign cancelled before its window was announced", time.Time{}
		return e, Effects{}
	case (c.Status == StatusCancelled || c.Withdraw) && withdrawable:
		e.Withdrawing, e.RetryAt = true, time.Time{}
		return e, Effects{Commands: []admission.Command{Withdrawal(c, key, e)}}
	case e.Phase == PhaseAnnounced && e.Window != nil && e.Window.Ended(now):
		e.Phase = PhaseOverdue
		return e, Effects{}
	case e.Phase != PhasePlanned || e.Window == nil || c.Status != StatusActive || !c.WaveOpen(e.Wave):
		return e, Effects{}
	}
	if e.Window.Start.Before(now.Add(set.margin()/2 + notice)) {
		if !e.RetryAt.IsZero() {
			e.Phase, e.RetryAt = PhaseRejected, time.Time{}
			e.Reason = "refused while an update was in progress, until its window was too near to announce"
			return e, Effects{}
		}
		e.Window = nil // too near now: Replan gives it another
		return e, Effects{}
	}
	if now.Before(e.Window.Start.Add(-c.spec.AnnounceLead-set.margin())) || now.Before(e.RetryAt) {
		return e, Effects{}
	}
	e.Phase, e.Reason, e.RetryAt = PhaseAnnounced, "", time.Time{}
	return e, Effects{Commands: []admission.Command{Announcement(c, key, e)}}
}

// retried is the entity planned anew when a retry in effect covers its phase.
func retried(c *Campaign, e Entity) Entity {
	for _, r := range c.Retries {
		if e.Phase == r.Phase && e.Generation < r.Generation {
			return Entity{Phase: PhasePlanned, ResourceID: e.ResourceID, Generation: r.Generation, Wave: e.Wave}
		}
	}
	return e
}
