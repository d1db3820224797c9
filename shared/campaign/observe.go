package campaign

import (
	"fmt"
	"time"

	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/domain"
)

// Observe is what an outcome event of the entity of key (from maint.evt.<key>) does to its
// phase. Events are matched to the entity's generation: its announcement and its withdrawal by
// their ids, the other commands by the campaign the event carries (the record's, while the
// window is the campaign's). Outcome events come in the order of the entity's commands.
//
// The announcement: applied (or duplicate) → announced, also from cancelled (Step then
// withdraws it); refused because the window is another's (RequestNotAllowed, "campaign") →
// superseded; refused because an update was in progress (RequestNotAllowed, "task") →
// planned, to be sent again from RetryAfter on; otherwise refused or dead-lettered →
// rejected. The withdrawal: applied → cancelled in a cancelled campaign, else planned again
// in the campaign's generation (announced anew on resume); refused on "ifCampaign" →
// superseded; refused because the update started → in_progress; otherwise sent again from
// RetryAfter on. Another command applied on the campaign's window: an update task →
// in_progress, UpdateSucceeded → succeeded, UpdateFailed → failed, another Pending →
// superseded, one that leaves the entity None (an SRE's None, Forget) → cleared; the others
// (CustomerActionNeeded, Reschedule) leave the phase (a Reschedule moved the window: the
// function reads it from the record).
func Observe(c *Campaign, set Settings, key string, e Entity, ev domain.Event) Entity {
	switch ev.CommandID {
	case admission.AnnounceID(c.ID, e.Generation, key):
		return observeAnnouncement(set, e, ev)
	case admission.WithdrawID(c.ID, e.Generation, key):
		return observeWithdrawal(c, set, e, ev)
	}
	if ev.Outcome != domain.OutcomeApplied || ev.Campaign == nil || ev.Campaign.ID != c.ID || ev.Campaign.Generation != e.Generation {
		return e
	}
	to, why := e.Phase, ""
	switch {
	case ev.Task.Kind() == domain.KindUpdate:
		to = PhaseInProgress
	case ev.Task == domain.TaskUpdateSucceeded:
		to = PhaseSucceeded
	case ev.Task == domain.TaskUpdateFailed:
		to, why = PhaseFailed, domain.Truncate(ev.Error, 256)
	case ev.Task == domain.TaskPending:
		to, why = PhaseSuperseded, fmt.Sprintf("its window was replaced by command %s", domain.Truncate(ev.CommandID, 128))
	case ev.Task == domain.TaskReschedule:
		return e
	case ev.To == domain.StateNone:
		to, why = PhaseCleared, fmt.Sprintf("command %s (%s) cleared it", domain.Truncate(ev.CommandID, 128), ev.Task)
	default:
		return e
	}
	e.Phase, e.Reason, e.Withdrawing, e.RetryAt = to, why, false, zeroTime
	return e
}

func observeAnnouncement(set Settings, e Entity, ev domain.Event) Entity {
	switch ev.Outcome {
	case domain.OutcomeApplied, domain.OutcomeDuplicate:
		if e.Phase == PhasePlanned || e.Phase == PhaseCancelled {
			e.Phase, e.Reason, e.RetryAt = PhaseAnnounced, "", zeroTime
		}
		return e
	}
	if e.Phase != PhasePlanned && e.Phase != PhaseAnnounced {
		return e // cancelled, or moved on meanwhile
	}
	switch {
	case ev.Outcome == domain.OutcomeRejected && ev.Code == domain.CodeRequestNotAllowed && ev.Target == "campaign":
		e.Phase = PhaseSuperseded
	case ev.Outcome == domain.OutcomeRejected && ev.Code == domain.CodeRequestNotAllowed && ev.Target == "task":
		e.Phase, e.RetryAt = PhasePlanned, ev.At.Add(set.retryAfter())
	default:
		e.Phase = PhaseRejected
	}
	e.Reason = refusal(ev)
	return e
}

func observeWithdrawal(c *Campaign, set Settings, e Entity, ev domain.Event) Entity {
	if e.Phase != PhaseAnnounced && e.Phase != PhaseOverdue {
		return e // the update started, or the window went, before the outcome came
	}
	e.Withdrawing = false
	switch {
	case ev.Outcome == domain.OutcomeApplied || ev.Outcome == domain.OutcomeDuplicate:
		if c.Status == StatusCancelled {
			e.Phase, e.Reason = PhaseCancelled, "withdrawn: the campaign was cancelled"
			return e
		}
		e.Phase, e.Generation, e.Reason = PhasePlanned, c.Generation, "withdrawn while the campaign was paused"
	case ev.Outcome == domain.OutcomeRejected && ev.Target == "ifCampaign":
		e.Phase, e.Reason = PhaseSuperseded, refusal(ev)
	case ev.Outcome == domain.OutcomeRejected && ev.Code == domain.CodeRequestNotAllowed && ev.Target == "task":
		e.Phase, e.Reason = PhaseInProgress, ""
	default:
		e.Reason, e.RetryAt = "withdrawal "+refusal(ev), ev.At.Add(set.retryAfter())
	}
	return e
}

// refusal describes a refused or dead-lettered command's outcome.
func refusal(ev domain.Event) string {
	if ev.Outcome == domain.OutcomeDeadLettered {
		return "dead-lettered: " + domain.Truncate(ev.Message, 200)
	}
	s := string(ev.Code)
	if ev.Target != "" {
		s += " (" + ev.Target + ")"
	}
	return s + ": " + domain.Truncate(ev.Message, 200)
}

var zeroTime time.Time
