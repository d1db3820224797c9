package campaign_test

import (
	"strings"
	"testing"
	"time"

	"maintsignals/shared/campaign"
	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/campaignspec/spectest"
	"maintsignals/shared/domain"
)

const (
	entityID  = "/subscriptions/aaaa/resourceGroups/rg/providers/P/c1"
	entityKey = "subscriptions/aaaa/resourcegroups/rg/providers/p/c1"
)

var window = &domain.Window{Start: spectest.UTC("2026-12-20T00:00:00Z"), End: spectest.UTC("2026-12-20T04:00:00Z")}

// live is the spectest.Example campaign, created and activated, in the status given, both waves open.
func live(t testing.TB, status campaign.Status) *campaign.Campaign {
	t.Helper()
	s := spectest.MustSpec(t, []byte(spectest.Example))
	c, _ := campaign.Activate(campaign.NewCampaign(s, spectest.UTC("2026-11-01T00:00:00Z")), tallyOf(s, 0, campaign.PhasePlanned, 10), spectest.UTC("2026-11-01T00:00:00Z"))
	b, _ := c.Encode()
	c, err := campaign.DecodeCampaign([]byte(strings.Replace(string(b), `"waves":[{},{}]`, `"waves":[{"opened":true,"approved":true},{"opened":true}]`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	c.Status = status
	return c
}

func tallyOf(s *campaignspec.Spec, wave int, p campaign.Phase, n int) campaign.Tally {
	t := campaign.NewTally(s)
	for range n {
		t.Add(wave, p)
	}
	return t
}

func ent(p campaign.Phase, gen int) campaign.Entity {
	return campaign.Entity{Phase: p, ResourceID: entityID, Generation: gen, Window: window, Wave: 0}
}

type evKind int

const (
	ours evKind = iota
	withdrawal
	other
)

func TestObserve_PhaseFollowsTheOutcomeEvents(t *testing.T) {
	at := spectest.UTC("2026-12-06T00:00:01Z")
	ref1 := &domain.CampaignRef{ID: "pucm-2026-12", Generation: 1}
	cases := []struct {
		name   string
		status campaign.Status
		e      campaign.Entity
		kind   evKind
		ev     domain.Event
		want   campaign.Phase
		gen    int
		retry  bool
		reason string
	}{
		{"announcement applied", campaign.StatusActive, ent(campaign.PhasePlanned, 1), ours, domain.Event{Outcome: domain.OutcomeApplied, Task: domain.TaskPending, Campaign: ref1}, campaign.PhaseAnnounced, 1, false, ""},
		{"announcement applied after the write", campaign.StatusActive, ent(campaign.PhaseAnnounced, 1), ours, domain.Event{Outcome: domain.OutcomeApplied, Task: domain.TaskPending, Campaign: ref1}, campaign.PhaseAnnounced, 1, false, ""},
		{"announcement duplicate", campaign.StatusActive, ent(campaign.PhasePlanned, 1), ours, domain.Event{Outcome: domain.OutcomeDuplicate}, campaign.PhaseAnnounced, 1, false, ""},
		{"announcement applied after a cancel", campaign.StatusCancelled, ent(campaign.PhaseCancelled, 1), ours, domain.Event{Outcome: domain.OutcomeApplied, Campaign: ref1}, campaign.PhaseAnnounced, 1, false, ""},
		{"announcement of another generation", campaign.StatusActive, ent(campaign.PhasePlanned, 2), ours, domain.Event{Outcome: domain.OutcomeApplied, Task: domain.TaskPending, Campaign: ref1}, campaign.PhasePlanned, 2, false, ""},
		{"another window stands", campaign.StatusActive, ent(campaign.PhaseAnnounced, 1), ours, domain.Event{Outcome: domain.OutcomeRejected, Code: domain.CodeRequestNotAllowed, Target: "campaign", Message: "not its window"}, campaign.PhaseSuperseded, 1, false, "RequestNotAllowed (campaign): not its window"},
		{"busy: tried again", campaign.StatusActive, ent(campaign.PhaseAnnounced, 1), ours, domain.Event{Outcome: domain.OutcomeRejected, Code: domain.CodeRequestNotAllowed, Target: "task", At: at}, campaign.PhasePlanned, 1, true, "RequestNotAllowed (task)"},
		{"refused by the policy", campaign.StatusActive, ent(campaign.PhaseAnnounced, 1), ours, domain.Event{Outcome: domain.OutcomeRejected, Code: domain.CodeInvalidParameter, Target: "window", Message: "not inside"}, campaign.PhaseRejected, 1, false, "InvalidParameter (window): not inside"},
		{"refused unsigned", campaign.StatusActive, ent(campaign.PhaseAnnounced, 1), ours, domain.Event{Outcome: domain.OutcomeRejected, Code: domain.CodeUnauthorized}, campaign.PhaseRejected, 1, false, "Unauthorized"},
		{"dead-lettered", campaign.StatusActive, ent(campaign.PhaseAnnounced, 1), ours, domain.Event{Outcome: domain.OutcomeDeadLettered, Message: "store down"}, campaign.PhaseRejected, 1, false, "dead-lettered: store down"},
		{"refused after a cancel", campaign.StatusCancelled, ent(campaign.PhaseCancelled, 1), ours, domain.Event{Outcome: domain.OutcomeRejected, Code: domain.CodeInvalidParameter}, campaign.PhaseCancelled, 1, false, ""},
		{"the update starts", campaign.StatusActive, ent(campaign.PhaseAnnounced, 1), other, domain.Event{Outcome: domain.OutcomeApplied, Task: domain.TaskEverything, Campaign: ref1}, campaign.PhaseInProgress, 1, false, ""},
		{"the update starts late", campaign.StatusActive, ent(campaign.PhaseOverdue, 1), other, domain.Event{Outcome: domain.OutcomeApplied, Task: domain.TaskOperatorUpdate, Campaign: ref1}, campaign.PhaseInProgress, 1, false, ""},
		{"the update succeeds", campaign.StatusActive, ent(campaign.PhaseInProgress, 1), other, domain.Event{Outcome: domain.OutcomeApplied, Task: domain.TaskUpdateSucceeded, To: domain.StateNone, Campaign: ref1}, campaign.PhaseSucceeded, 1, false, ""},
		{"the update fails", campaign.StatusActive, ent(campaign.PhaseInProgress, 1), other, domain.Event{Outcome: domain.OutcomeApplied, Task: domain.TaskUpdateFailed, Error: "etcd quorum lost", Campaign: ref1}, campaign.PhaseFailed, 1, false, "etcd quorum lost"},
		{"an SRE starts it again after a failure", campaign.StatusActive, ent(campaign.PhaseFailed, 1), other, domain.Event{Outcome: domain.OutcomeApplied, Task: domain.TaskEverything, Campaign: ref1}, campaign.PhaseInProgress, 1, false, ""},
		{"an SRE clears it", campaign.StatusActive, ent(campaign.PhaseAnnounced, 1), other, domain.Event{CommandID: "sre-1", Outcome: domain.OutcomeApplied, Task: domain.TaskNone, To: domain.StateNone, Campaign: ref1}, campaign.PhaseCleared, 1, false, "command sre-1 (None) cleared it"},
		{"an SRE clears a failed one", campaign.StatusActive, ent(campaign.PhaseFailed, 1), other, domain.Event{Outcome: domain.OutcomeApplied, Task: domain.TaskNone, To: domain.StateNone, Campaign: ref1}, campaign.PhaseCleared, 1, false, ""},
		{"another Pending replaces the window", campaign.StatusActive, ent(campaign.PhaseAnnounced, 1), other, domain.Event{CommandID: "sre-2", Outcome: domain.OutcomeApplied, Task: domain.TaskPending, To: domain.StatePending, Campaign: ref1}, campaign.PhaseSuperseded, 1, false, "replaced by command sre-2"},
		{"customer action needed keeps the window", campaign.StatusActive, ent(campaign.PhaseAnnounced, 1), other, domain.Event{Outcome: domain.OutcomeApplied, Task: domain.TaskCustomerActionNeeded, To: domain.StateCustomerActionNeeded, Campaign: ref1}, campaign.PhaseAnnounced, 1, false, ""},
		{"a reschedule moves the window", campaign.StatusActive, ent(campaign.PhaseAnnounced, 1), other, domain.Event{Outcome: domain.OutcomeApplied, Task: "Reschedule", To: domain.StatePending, Campaign: ref1}, campaign.PhaseAnnounced, 1, false, ""},
		{"a refused command changes nothing", campaign.StatusActive, ent(campaign.PhaseAnnounced, 1), other, domain.Event{Outcome: domain.OutcomeRejected, Task: domain.TaskNone, Campaign: ref1}, campaign.PhaseAnnounced, 1, false, ""},
		{"an event of an older generation", campaign.StatusActive, ent(campaign.PhaseAnnounced, 2), other, domain.Event{Outcome: domain.OutcomeApplied, Task: domain.TaskUpdateFailed, Campaign: ref1}, campaign.PhaseAnnounced, 2, false, ""},
		{"an event of another campaign", campaign.StatusActive, ent(campaign.PhaseAnnounced, 1), other, domain.Event{Outcome: domain.OutcomeApplied, Task: domain.TaskEverything, Campaign: &domain.CampaignRef{ID: "other", Generation: 1}}, campaign.PhaseAnnounced, 1, false, ""},
		{"an event of no campaign", campaign.StatusActive, ent(campaign.PhaseAnnounced, 1), other, domain.Event{Outcome: domain.OutcomeApplied, Task: domain.TaskEverything}, campaign.PhaseAnnounced, 1, false, ""},
		{"withdrawn on cancel", campaign.StatusCancelled, withdrawing(ent(campaign.PhaseAnnounced, 1)), withdrawal, domain.Event{Outcome: domain.OutcomeApplied, Task: domain.TaskNone}, campaign.PhaseCancelled, 1, false, "cancelled"},
		{"withdrawn while overdue", campaign.StatusCancelled, withdrawing(ent(campaign.PhaseOverdue, 1)), withdrawal, domain.Event{Outcome: domain.OutcomeApplied, Task: domain.TaskNone}, campaign.PhaseCancelled, 1, false, "cancelled"},
		{"withdrawn on pause", campaign.StatusPaused, withdrawing(ent(campaign.PhaseAnnounced, 1)), withdrawal, domain.Event{Outcome: domain.OutcomeDuplicate}, campaign.PhasePlanned, 2, false, "paused"},
		{"withdrawal refused: superseded", campaign.StatusPaused, withdrawing(ent(campaign.PhaseAnnounced, 1)), withdrawal, domain.Event{Outcome: domain.OutcomeRejected, Code: domain.CodeRequestNotAllowed, Target: "ifCampaign"}, campaign.PhaseSuperseded, 1, false, "ifCampaign"},
		{"withdrawal refused: started", campaign.StatusCancelled, withdrawing(ent(campaign.PhaseAnnounced, 1)), withdrawal, domain.Event{Outcome: domain.OutcomeRejected, Code: domain.CodeRequestNotAllowed, Target: "task"}, campaign.PhaseInProgress, 1, false, ""},
		{"withdrawal refused after the start came", campaign.StatusCancelled, ent(campaign.PhaseInProgress, 1), withdrawal, domain.Event{Outcome: domain.OutcomeRejected, Code: domain.CodeRequestNotAllowed, Target: "task"}, campaign.PhaseInProgress, 1, false, ""},
		{"withdrawal refused otherwise", campaign.StatusCancelled, withdrawing(ent(campaign.PhaseAnnounced, 1)), withdrawal, domain.Event{Outcome: domain.OutcomeRejected, Code: domain.CodeUnauthorized, At: at}, campaign.PhaseAnnounced, 1, true, "withdrawal Unauthorized"},
	}
	for _, c := range cases {
		camp := live(t, c.status)
		if c.status == campaign.StatusPaused {
			camp.Generation = 2 // paused with withdraw: a new generation
		}
		switch c.kind {
		case ours:
			c.ev.CommandID = admission.AnnounceID(camp.ID, 1, entityKey)
		case withdrawal:
			c.ev.CommandID = admission.WithdrawID(camp.ID, 1, entityKey)
		}
		got := campaign.Observe(camp, campaign.Settings{}, entityKey, c.e, c.ev)
		switch {
		case got.Phase != c.want || got.Generation != c.gen:
			t.Errorf("%s: %s gen %d, want %s gen %d", c.name, got.Phase, got.Generation, c.want, c.gen)
		case c.retry != !got.RetryAt.IsZero() || c.retry && !got.RetryAt.Equal(at.Add(campaign.DefaultRetryAfter)):
			t.Errorf("%s: retry at %v", c.name, got.RetryAt)
		case !strings.Contains(got.Reason, c.reason):
			t.Errorf("%s: reason %q, want it to say %q", c.name, got.Reason, c.reason)
		case got.Withdrawing && got.Phase != campaign.PhaseAnnounced:
			t.Errorf("%s: still withdrawing in %s", c.name, got.Phase)
		case got.ResourceID != entityID || got.Window != window:
			t.Errorf("%s: the entity lost its ID or window: %+v", c.name, got)
		}
	}
}

func withdrawing(e campaign.Entity) campaign.Entity { e.Withdrawing = true; return e }

func TestStep_WhatTimeAndTheCampaignDo(t *testing.T) {
	due := window.Start.Add(-14*domain.Day - campaign.DefaultMargin) // announceLead and the margin before
	cases := []struct {
		name    string
		c       func(*campaign.Campaign)
		e       campaign.Entity
		notice  time.Duration
		now     time.Time
		want    campaign.Phase
		window  bool
		command string // "announce", "withdraw" or ""
	}{
		{"not yet due", nil, ent(campaign.PhasePlanned, 1), 0, due.Add(-time.Second), campaign.PhasePlanned, true, ""},
		{"due", nil, ent(campaign.PhasePlanned, 1), 0, due, campaign.PhaseAnnounced, true, "announce"},
		{"due with the notice equal to the lead, a tick late", nil, ent(campaign.PhasePlanned, 1), 14 * domain.Day, due.Add(time.Minute), campaign.PhaseAnnounced, true, "announce"},
		{"too near for the notice", nil, ent(campaign.PhasePlanned, 1), 14 * domain.Day, due.Add(campaign.DefaultMargin/2 + time.Second), campaign.PhasePlanned, false, ""},
		{"too near, after waiting out an update", nil, retryAt(ent(campaign.PhasePlanned, 1), due), 14 * domain.Day, due.Add(2 * time.Minute), campaign.PhaseRejected, true, ""},
		{"waiting out an update", nil, retryAt(ent(campaign.PhasePlanned, 1), due.Add(time.Hour)), 0, due.Add(time.Minute), campaign.PhasePlanned, true, ""},
		{"done waiting out an update", nil, retryAt(ent(campaign.PhasePlanned, 1), due.Add(time.Hour)), 0, due.Add(time.Hour), campaign.PhaseAnnounced, true, "announce"},
		{"paused", status(campaign.StatusPaused), ent(campaign.PhasePlanned, 1), 0, due, campaign.PhasePlanned, true, ""},
		{"halted", status(campaign.StatusHalted), ent(campaign.PhasePlanned, 1), 0, due, campaign.PhasePlanned, true, ""},
		{"its wave closed", closeWave(1), wave1(ent(campaign.PhasePlanned, 1)), 0, due, campaign.PhasePlanned, true, ""},
		{"its wave closed, too near: kept for when it opens", closeWave(1), wave1(ent(campaign.PhasePlanned, 1)), 0, window.Start, campaign.PhasePlanned, true, ""},
		{"no window yet", nil, noWindow(ent(campaign.PhasePlanned, 1)), 0, due, campaign.PhasePlanned, false, ""},
		{"the window passed unannounced", nil, ent(campaign.PhasePlanned, 1), 0, window.End, campaign.PhasePlanned, false, ""},
		{"announced, window running", nil, ent(campaign.PhaseAnnounced, 1), 0, window.Start, campaign.PhaseAnnounced, true, ""},
		{"announced, window ended", nil, ent(campaign.PhaseAnnounced, 1), 0, window.End, campaign.PhaseOverdue, true, ""},
		{"paused, window ended", status(campaign.StatusPaused), ent(campaign.PhaseAnnounced, 1), 0, window.End, campaign.PhaseOverdue, true, ""},
		{"in progress past its window", nil, ent(campaign.PhaseInProgress, 1), 0, window.End, campaign.PhaseInProgress, true, ""},
		{"cancelled: planned", status(campaign.StatusCancelled), ent(campaign.PhasePlanned, 1), 0, due, campaign.PhaseCancelled, true, ""},
		{"cancelled: rejected", status(campaign.StatusCancelled), ent(campaign.PhaseRejected, 1), 0, due, campaign.PhaseCancelled, true, ""},
		{"cancelled: announced", status(campaign.StatusCancelled), ent(campaign.PhaseAnnounced, 1), 0, due, campaign.PhaseAnnounced, true, "withdraw"},
		{"cancelled: overdue", status(campaign.StatusCancelled), ent(campaign.PhaseOverdue, 1), 0, window.End, campaign.PhaseOverdue, true, "withdraw"},
		{"cancelled: withdrawing", status(campaign.StatusCancelled), withdrawing(ent(campaign.PhaseAnnounced, 1)), 0, due, campaign.PhaseAnnounced, true, ""},
		{"cancelled: withdrawal to try again later", status(campaign.StatusCancelled), retryAt(ent(campaign.PhaseAnnounced, 1), due.Add(time.Hour)), 0, due, campaign.PhaseAnnounced, true, ""},
		{"cancelled: in progress", status(campaign.StatusCancelled), ent(campaign.PhaseInProgress, 1), 0, due, campaign.PhaseInProgress, true, ""},
		{"cancelled: succeeded", status(campaign.StatusCancelled), ent(campaign.PhaseSucceeded, 1), 0, due, campaign.PhaseSucceeded, true, ""},
		{"paused with withdraw: announced", withdrawn, ent(campaign.PhaseAnnounced, 1), 0, due, campaign.PhaseAnnounced, true, "withdraw"},
		{"paused with withdraw: planned", withdrawn, ent(campaign.PhasePlanned, 1), 0, due, campaign.PhasePlanned, true, ""},
		{"paused with withdraw: in progress", withdrawn, ent(campaign.PhaseInProgress, 1), 0, due, campaign.PhaseInProgress, true, ""},
		{"retry of failed", retry(campaign.PhaseFailed, 2), ent(campaign.PhaseFailed, 1), 0, due, campaign.PhasePlanned, false, ""},
		{"retry of failed, already retried", retry(campaign.PhaseFailed, 2), ent(campaign.PhaseFailed, 2), 0, due, campaign.PhaseFailed, true, ""},
		{"retry of failed, a succeeded one", retry(campaign.PhaseFailed, 2), ent(campaign.PhaseSucceeded, 1), 0, due, campaign.PhaseSucceeded, true, ""},
	}
	for _, c := range cases {
		camp := live(t, campaign.StatusActive)
		if c.c != nil {
			c.c(camp)
		}
		got, fx := campaign.Step(camp, campaign.Settings{}, entityKey, c.e, c.notice, c.now)
		if got.Phase != c.want || (got.Window != nil) != c.window {
			t.Errorf("%s: %s with window %v, want %s (window %t)", c.name, got.Phase, got.Window, c.want, c.window)
		}
		switch {
		case c.command == "" && len(fx.Commands) > 0:
			t.Errorf("%s: sends %+v", c.name, fx.Commands)
		case c.command == "announce" && (len(fx.Commands) != 1 || fx.Commands[0].ID != admission.AnnounceID(camp.ID, got.Generation, entityKey) || fx.Commands[0].Window != got.Window):
			t.Errorf("%s: commands %+v, want its announcement", c.name, fx.Commands)
		case c.command == "withdraw" && (len(fx.Commands) != 1 || fx.Commands[0].ID != admission.WithdrawID(camp.ID, got.Generation, entityKey) || !got.Withdrawing):
			t.Errorf("%s: commands %+v (withdrawing %t), want its withdrawal", c.name, fx.Commands, got.Withdrawing)
		}
	}
}

func status(s campaign.Status) func(*campaign.Campaign) {
	return func(c *campaign.Campaign) { c.Status = s }
}
func closeWave(w int) func(*campaign.Campaign) {
	return func(c *campaign.Campaign) { c.Waves[w].Opened = false }
}
func withdrawn(c *campaign.Campaign) {
	c.Status, c.Withdraw, c.Generation = campaign.StatusPaused, true, 2
}
func retry(p campaign.Phase, gen int) func(*campaign.Campaign) {
	return func(c *campaign.Campaign) {
		c.Generation = gen
		c.Retries = append(c.Retries, campaign.Retry{Phase: p, Generation: gen})
	}
}
func retryAt(e campaign.Entity, at time.Time) campaign.Entity { e.RetryAt = at; return e }
func wave1(e campaign.Entity) campaign.Entity                 { e.Wave = 1; return e }
func noWindow(e campaign.Entity) campaign.Entity              { e.Window = nil; return e }
