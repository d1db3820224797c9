package command

import (
	"strings"
	"testing"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// customerPolicy is the contract's example: weekdays 22:00 Berlin for 6h, a holiday freeze,
// 14 days of notice, rescheduling allowed (or not).
func customerPolicy(t *testing.T, scope string, reschedule bool) *policy.Policy {
	t.Helper()
	doc := `{"scope": "` + scope + `", "timeZone": "Europe/Berlin",
	 "windows": [{"rrule": "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "start": "22:00", "duration": "6h"}],
	 "blackouts": [{"start": "2026-12-20", "end": "2027-01-04", "reason": "holiday freeze"}],
	 "minNotice": "336h", "allowReschedule": ` + map[bool]string{true: "true", false: "false"}[reschedule] + `}`
	p, rej := policy.Parse([]byte(doc), time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC))
	if rej != nil {
		t.Fatal(rej)
	}
	return p
}

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func span(start, end string) *domain.Window {
	w := domain.Window{Start: ts(start)}
	if end != "" {
		w.End = ts(end)
	}
	return &w
}

// TestDecide_ThePolicyInForce: the decision judges by the policy of the delivery (the one in
// force at the stored time), in the contract's order and before the transition table; force
// overrides it and the applied outcome says "override": "policy"; tasks no policy refuses are
// applied.
func TestDecide_ThePolicyInForce(t *testing.T) {
	const rg = "/subscriptions/s1/resourceGroups/rg-1"
	const id = rg + "/providers/p/clusters/c1"
	p := customerPolicy(t, rg, true)
	stored := ts("2026-11-02T12:00:00Z") // a Monday; the notice in force runs to 2026-11-16T12:00:00Z
	none := domain.Record{State: domain.StateNone}
	updating := domain.Record{State: domain.StatePlanned, Updating: true, Task: domain.TaskEverything}
	pendingRec := domain.Record{State: domain.StatePending, Window: span("2026-11-20T21:00:00Z", "2026-11-21T01:00:00Z"), StateSince: stored.Add(-time.Hour)}
	announce := func(start, end string, force bool) domain.Command {
		return domain.Command{ID: "c-1", ResourceID: id, Task: domain.TaskPending, Window: span(start, end), Force: force}
	}
	task := func(tk domain.Task, force bool) domain.Command {
		c := domain.Command{ID: "c-1", ResourceID: id, Task: tk, Force: force}
		if tk == domain.TaskUpdateFailed {
			c.Error = "boom"
		}
		return c
	}
	for _, tc := range []struct {
		name      string
		rec       domain.Record
		cmd       domain.Command
		storedAt  time.Time
		p         *policy.Policy
		minNotice time.Duration
		want      action
		code      domain.Code
		target    string
		message   string
		override  string
	}{
		{name: "an allowed window with the notice is announced", rec: none, cmd: announce("2026-11-20T21:00:00Z", "2026-11-21T01:00:00Z", false), storedAt: stored, p: p, want: actApply},
		{name: "a window on a Saturday is refused, naming the next allowed start", rec: none, cmd: announce("2026-11-21T21:00:00Z", "2026-11-22T01:00:00Z", false), storedAt: stored, p: p,
			want: actReject, code: domain.CodeInvalidParameter, target: "window", message: "the next allowed start of a 4h0m0s window is 2026-11-23T21:00:00Z"},
		{name: "an allowed window inside the notice is refused on window.start", rec: none, cmd: announce("2026-11-09T21:00:00Z", "2026-11-10T01:00:00Z", false), storedAt: stored, p: p,
			want: actReject, code: domain.CodeInvalidParameter, target: "window.start"},
		{name: "the same window is fine by a policy that does not cover the entity", rec: none, cmd: announce("2026-11-21T21:00:00Z", "2026-11-22T01:00:00Z", false), storedAt: stored, want: actApply},
		{name: "the function's notice still holds without a policy", rec: none, cmd: announce("2026-11-02T13:00:00Z", "2026-11-02T14:00:00Z", false), storedAt: stored, minNotice: 24 * time.Hour,
			want: actReject, code: domain.CodeInvalidParameter, target: "window.start"},
		{name: "forced, a refused window is announced with the override", rec: none, cmd: announce("2026-11-21T21:00:00Z", "2026-11-22T01:00:00Z", true), storedAt: stored, p: p, want: actApply, override: policy.OverridePolicy},
		{name: "forced, a window too soon only for the function's notice has no policy override", rec: none, cmd: announce("2026-11-02T22:00:00Z", "2026-11-03T01:00:00Z", true), storedAt: stored, minNotice: 24 * time.Hour, want: actApply},
		{name: "a Pending without a window is never refused by a policy", rec: none, cmd: task(domain.TaskPending, false), storedAt: stored, p: p, want: actApply},
		{name: "an update stored inside a window is applied", rec: pendingRec, cmd: task(domain.TaskEverything, false), storedAt: ts("2026-11-20T21:30:00Z"), p: p, want: actApply},
		{name: "an update stored outside every window is refused on policy", rec: pendingRec, cmd: task(domain.TaskEverything, false), storedAt: stored, p: p,
			want: actReject, code: domain.CodeRequestNotAllowed, target: "policy", message: "work is next allowed from 2026-11-02T21:00:00Z"},
		{name: "an update stored in the holiday freeze is refused on policy", rec: none, cmd: task(domain.TaskOperatorUpdate, false), storedAt: ts("2026-12-22T22:30:00Z"), p: p,
			want: actReject, code: domain.CodeRequestNotAllowed, target: "policy", message: "holiday freeze"},
		{name: "forced, an urgent update outside the windows starts with the override", rec: none, cmd: task(domain.TaskCertificatesRenewal, true), storedAt: stored, p: p, want: actApply, override: policy.OverridePolicy},
		{name: "the policy is judged before the transition table", rec: updating, cmd: task(domain.TaskEverything, false), storedAt: stored, p: p,
			want: actReject, code: domain.CodeRequestNotAllowed, target: "policy"},
		{name: "None is never refused by a policy", rec: pendingRec, cmd: task(domain.TaskNone, false), storedAt: stored, p: p, want: actApply},
		{name: "CustomerActionNeeded is never refused by a policy", rec: pendingRec, cmd: task(domain.TaskCustomerActionNeeded, false), storedAt: stored, p: p, want: actApply},
		{name: "UpdateSucceeded is never refused by a policy", rec: updating, cmd: task(domain.TaskUpdateSucceeded, false), storedAt: stored, p: p, want: actApply},
		{name: "UpdateFailed is never refused by a policy", rec: updating, cmd: task(domain.TaskUpdateFailed, false), storedAt: stored, p: p, want: actApply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules := settings{MaxCommandAge: 15 * time.Minute, MinNotice: tc.minNotice}
			dec := decide(tc.rec, tc.cmd, delivery{Seq: 5, StoredAt: tc.storedAt, Policy: tc.p}, rules, tc.storedAt)
			if dec.Action != tc.want {
				t.Fatalf("action %s (%s: %s), want %s", dec.Action, dec.Why, dec.Event.Message, tc.want)
			}
			ev := dec.Event
			if ev.Code != tc.code || ev.Target != tc.target || !strings.Contains(ev.Message, tc.message) || ev.Override != tc.override {
				t.Errorf("event %+v, want code %q target %q message with %q override %q", ev, tc.code, tc.target, tc.message, tc.override)
			}
			if dec.Action == actApply && dec.Next.LastEvent.Override != tc.override {
				t.Errorf("the record's last event has override %q", dec.Next.LastEvent.Override)
			}
		})
	}
}

// TestDecide_Reschedule: each refusal of a Reschedule (EC2's rules, the policy's, the campaign's
// deadline), and what an applied one writes: the window replaced, Pending kept with its
// stateSince and campaign.
func TestDecide_Reschedule(t *testing.T) {
	const rg = "/subscriptions/s1/resourceGroups/rg-1"
	const id = rg + "/providers/p/clusters/c1"
	p, fixed := customerPolicy(t, rg, true), customerPolicy(t, rg, false)
	stored := ts("2026-11-02T12:00:00Z")
	since := stored.Add(-48 * time.Hour)
	ref := &domain.CampaignRef{ID: "fleet-1", Generation: 2}
	announced := domain.Record{ResourceID: id, State: domain.StatePending, Window: span("2026-11-20T21:00:00Z", "2026-11-21T01:00:00Z"), StateSince: since, Reason: "PUCM", Campaign: ref,
		LastCommandSeq: 3, LastCommandAt: since}
	soon := announced
	soon.Window = span("2026-11-02T12:04:00Z", "2026-11-02T15:00:00Z")
	updatingRec := announced
	updatingRec.Updating = true
	noWindow := announced
	noWindow.Window = nil
	planned := announced
	planned.State = domain.StatePlanned
	move := func(start, end string) domain.Command {
		return domain.Command{ID: "r-1", ResourceID: id, Task: domain.TaskReschedule, Window: span(start, end)}
	}
	for _, tc := range []struct {
		name     string
		rec      domain.Record
		cmd      domain.Command
		p        *policy.Policy
		deadline time.Time
		code     domain.Code // "" applied
		target   string
		want     *domain.Window
	}{
		{name: "moved to another allowed window", rec: announced, cmd: move("2026-11-23T21:00:00Z", "2026-11-24T02:00:00Z"), p: p, want: span("2026-11-23T21:00:00Z", "2026-11-24T02:00:00Z")},
		{name: "without an end the window keeps its length", rec: announced, cmd: move("2026-11-23T22:00:00Z", ""), p: p, want: span("2026-11-23T22:00:00Z", "2026-11-24T02:00:00Z")},
		{name: "the new start may be sooner than the notice in force (the customer chose)", rec: announced, cmd: move("2026-11-02T21:00:00Z", ""), p: p, want: span("2026-11-02T21:00:00Z", "2026-11-03T01:00:00Z")},
		{name: "refused: not Pending", rec: planned, cmd: move("2026-11-23T21:00:00Z", ""), p: p, code: domain.CodeRequestNotAllowed, target: "task"},
		{name: "refused: Pending without a window", rec: noWindow, cmd: move("2026-11-23T21:00:00Z", "2026-11-24T01:00:00Z"), p: p, code: domain.CodeRequestNotAllowed, target: "task"},
		{name: "refused: updating", rec: updatingRec, cmd: move("2026-11-23T21:00:00Z", ""), p: p, code: domain.CodeRequestNotAllowed, target: "task"},
		{name: "refused: no policy covers the entity", rec: announced, cmd: move("2026-11-23T21:00:00Z", ""), code: domain.CodeRequestNotAllowed, target: "policy.allowReschedule"},
		{name: "refused: the policy does not allow rescheduling", rec: announced, cmd: move("2026-11-23T21:00:00Z", ""), p: fixed, code: domain.CodeRequestNotAllowed, target: "policy.allowReschedule"},
		{name: "refused: the new start less than an hour away", rec: announced, cmd: move("2026-11-02T12:30:00Z", "2026-11-02T14:00:00Z"), p: p, code: domain.CodeInvalidParameter, target: "window.start"},
		{name: "refused: the announced window starts within 5 minutes", rec: soon, cmd: move("2026-11-23T21:00:00Z", ""), p: p, code: domain.CodeInvalidParameter, target: "window.start"},
		{name: "refused: the new window outside the allowed windows", rec: announced, cmd: move("2026-11-21T21:00:00Z", ""), p: p, code: domain.CodeInvalidParameter, target: "window"},
		{name: "refused: the new window in a blackout", rec: announced, cmd: move("2026-12-21T21:00:00Z", ""), p: p, code: domain.CodeInvalidParameter, target: "window"},
		{name: "refused: past the campaign's deadline", rec: announced, cmd: move("2026-11-23T21:00:00Z", ""), p: p, deadline: ts("2026-11-22T00:00:00Z"), code: domain.CodeInvalidParameter, target: "window.end"},
		{name: "within the campaign's deadline", rec: announced, cmd: move("2026-11-23T21:00:00Z", ""), p: p, deadline: ts("2026-11-30T00:00:00Z"), want: span("2026-11-23T21:00:00Z", "2026-11-24T01:00:00Z")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, force := range []bool{false, true} { // force changes nothing here
				c := tc.cmd
				c.Force = force
				dec := decide(tc.rec, c, delivery{Seq: 9, StoredAt: stored, Policy: tc.p, Deadline: tc.deadline}, settings{MaxCommandAge: time.Minute, MinNotice: time.Hour}, stored)
				if tc.code != "" {
					if dec.Action != actReject || dec.Event.Code != tc.code || dec.Event.Target != tc.target {
						t.Errorf("force %t: %s %+v, want %s on %q", force, dec.Action, dec.Event, tc.code, tc.target)
					}
					continue
				}
				n := dec.Next
				if dec.Action != actApply || n.State != domain.StatePending || !n.StateSince.Equal(since) || n.Window.Start != tc.want.Start || n.Window.End != tc.want.End ||
					n.Campaign != ref || n.Reason != "PUCM" || n.LastCommandSeq != 9 || !n.UpdatedAt.Equal(stored) {
					t.Errorf("force %t: %s, record %+v window %+v, want Pending since %s with %+v", force, dec.Action, n, n.Window, since, tc.want)
				}
				if ev := dec.Event; ev.From != domain.StatePending || ev.To != domain.StatePending || ev.Task != domain.TaskReschedule || ev.Override != "" {
					t.Errorf("force %t: event %+v", force, ev)
				}
				if *tc.rec.Window != *announced.Window {
					t.Error("the record before was changed in place")
				}
			}
		})
	}
}
