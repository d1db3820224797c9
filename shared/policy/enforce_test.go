package policy_test

import (
	"strings"
	"testing"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// customer is the contract's example: weekdays 22:00 Berlin for 6h, a holiday freeze, 14 days
// of notice, rescheduling allowed.
func customer(t testing.TB) *policy.Policy {
	t.Helper()
	return compile(t, windowsOf("Europe/Berlin", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR 22:00 6h")+
		`, "blackouts": [{"start": "2026-12-20", "end": "2027-01-04", "reason": "holiday freeze"}], "minNotice": "336h", "allowReschedule": true`)
}

func pending(w domain.Window) domain.Command {
	return domain.Command{ID: "c1", ResourceID: scope + "/c1", Task: domain.TaskPending, Window: &w}
}

func task(tk domain.Task) domain.Command {
	return domain.Command{ID: "c1", ResourceID: scope + "/c1", Task: tk}
}

func TestEnforce_InTheOrderOfTheContract(t *testing.T) {
	p := customer(t)
	stored := utc("2026-11-01T12:00:00Z") // the notice in force runs to 2026-11-15T12:00:00Z
	cases := []struct {
		name      string
		c         domain.Command
		storedAt  time.Time
		p         *policy.Policy
		minNotice time.Duration
		code      domain.Code // "" for none
		target    string
		message   string // a part of it
	}{
		{"an allowed window with the notice", pending(win("2026-11-20T21:00:00Z", "2026-11-21T01:00:00Z")), stored, p, 0, "", "", ""},
		{"a window on a Saturday, the next allowed start named", pending(win("2026-11-21T21:00:00Z", "2026-11-22T01:00:00Z")), stored, p, 0,
			domain.CodeInvalidParameter, "window", "the next allowed start of a 4h0m0s window is 2026-11-23T21:00:00Z"},
		{"a window too soon and not allowed: window first, the next start after the notice", pending(win("2026-11-07T21:00:00Z", "2026-11-08T01:00:00Z")), stored, p, 0,
			domain.CodeInvalidParameter, "window", "is 2026-11-16T21:00:00Z"},
		{"a window longer than every allowed one", pending(win("2026-11-20T21:00:00Z", "2026-11-21T04:00:00Z")), stored, p, 0,
			domain.CodeInvalidParameter, "window", "no 7h0m0s window is allowed"},
		{"a window in the holiday freeze", pending(win("2026-12-21T21:00:00Z", "2026-12-22T01:00:00Z")), stored, p, 0,
			domain.CodeInvalidParameter, "window", `overlaps the blackout 2026-12-20 to 2027-01-04 (end exclusive) "holiday freeze" of the policy for ` + scope + `; the next allowed start of a 4h0m0s window is 2027-01-04T21:00:00Z`},
		{"an allowed window inside the policy's notice", pending(win("2026-11-06T21:00:00Z", "2026-11-07T01:00:00Z")), stored, p, 0,
			domain.CodeInvalidParameter, "window.start", "minimum notice of 336h0m0s"},
		{"the function's notice when it is the larger", pending(win("2026-11-20T21:00:00Z", "2026-11-21T01:00:00Z")), stored, p, 30 * domain.Day,
			domain.CodeInvalidParameter, "window.start", "minimum notice of 720h0m0s"},
		{"no policy: the function's notice alone", pending(win("2026-11-01T13:00:00Z", "2026-11-01T14:00:00Z")), stored, nil, 24 * time.Hour,
			domain.CodeInvalidParameter, "window.start", "minimum notice of 24h0m0s"},
		{"no policy: any window with the notice", pending(win("2026-11-21T21:00:00Z", "2026-11-22T01:00:00Z")), stored, nil, 24 * time.Hour, "", "", ""},
		{"a Pending without a window", task(domain.TaskPending), stored, p, 0, "", "", ""},
		{"an update stored inside a window", task(domain.TaskEverything), utc("2026-11-06T21:30:00Z"), p, 0, "", "", ""},
		{"an update stored outside every window", task(domain.TaskOperatorUpdate), utc("2026-11-06T12:00:00Z"), p, 0,
			domain.CodeRequestNotAllowed, "policy", "is outside every allowed window of the policy for " + scope + "; work is next allowed from 2026-11-06T21:00:00Z"},
		{"an update stored in a blackout, inside a window", task(domain.TaskCertificatesRenewal), utc("2026-12-22T22:00:00Z"), p, 0,
			domain.CodeRequestNotAllowed, "policy", "falls in the blackout 2026-12-20 to 2027-01-04"},
		{"no policy: an update at any time", task(domain.TaskEverything), utc("2026-11-07T12:00:00Z"), nil, 0, "", "", ""},
		{"None outside the windows", task(domain.TaskNone), utc("2026-12-22T12:00:00Z"), p, 0, "", "", ""},
		{"CustomerActionNeeded outside the windows", task(domain.TaskCustomerActionNeeded), utc("2026-12-22T12:00:00Z"), p, 0, "", "", ""},
		{"UpdateSucceeded outside the windows", task(domain.TaskUpdateSucceeded), utc("2026-12-22T12:00:00Z"), p, 0, "", "", ""},
		{"UpdateFailed outside the windows", domain.Command{ID: "c1", Task: domain.TaskUpdateFailed, Error: "boom"}, utc("2026-12-22T12:00:00Z"), p, 0, "", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := policy.Enforce(c.c, c.storedAt, c.p, c.minNotice)
			if d.Override != "" {
				t.Errorf("Override = %q without force", d.Override)
			}
			if c.code == "" {
				if d.Rejection != nil {
					t.Errorf("Enforce refused: %v", d.Rejection)
				}
				return
			}
			if d.Rejection == nil || d.Rejection.Code != c.code || d.Rejection.Target != c.target || !strings.Contains(d.Rejection.Message, c.message) {
				t.Errorf("Enforce = %v; want %s on %q with %q", d.Rejection, c.code, c.target, c.message)
			}
		})
	}
}

func TestEnforce_ForceOverridesAndSaysSo(t *testing.T) {
	p := customer(t)
	stored := utc("2026-11-01T12:00:00Z")
	forced := func(c domain.Command) domain.Command { c.Force = true; return c }
	cases := []struct {
		name      string
		c         domain.Command
		storedAt  time.Time
		p         *policy.Policy
		minNotice time.Duration
		override  string
	}{
		{"a window the policy refuses", forced(pending(win("2026-11-21T21:00:00Z", "2026-11-22T01:00:00Z"))), stored, p, 0, policy.OverridePolicy},
		{"inside the policy's notice", forced(pending(win("2026-11-06T21:00:00Z", "2026-11-07T01:00:00Z"))), stored, p, time.Hour, policy.OverridePolicy},
		{"inside the function's notice too: not the policy's doing", forced(pending(win("2026-11-06T21:00:00Z", "2026-11-07T01:00:00Z"))), stored, p, 30 * domain.Day, ""},
		{"no policy, inside the function's notice", forced(pending(win("2026-11-01T13:00:00Z", "2026-11-01T14:00:00Z"))), stored, nil, 24 * time.Hour, ""},
		{"an update in a blackout", forced(task(domain.TaskEverything)), utc("2026-12-22T22:00:00Z"), p, 0, policy.OverridePolicy},
		{"an update the policy allows", forced(task(domain.TaskEverything)), utc("2026-11-06T21:30:00Z"), p, 0, ""},
		{"an allowed window", forced(pending(win("2026-11-20T21:00:00Z", "2026-11-21T01:00:00Z"))), stored, p, 0, ""},
	}
	for _, c := range cases {
		d := policy.Enforce(c.c, c.storedAt, c.p, c.minNotice)
		if d.Rejection != nil || d.Override != c.override {
			t.Errorf("%s: Enforce = %+v; want no rejection and override %q", c.name, d, c.override)
		}
	}
}

func TestEnforce_SameDecisionEveryTime(t *testing.T) {
	// Replicas compile the stored policy afresh; a redelivery decides with the same inputs.
	c := pending(win("2026-11-21T21:00:00Z", "2026-11-22T01:00:00Z"))
	stored := utc("2026-11-01T12:00:00Z")
	first := policy.Enforce(c, stored, customer(t), 0)
	for range 3 {
		again := policy.Enforce(c, stored, customer(t), 0)
		if again.Rejection == nil || *again.Rejection != *first.Rejection {
			t.Fatalf("Enforce gave %v, then %v", first.Rejection, again.Rejection)
		}
	}
}

func TestNoticeInForce_TheLarger(t *testing.T) {
	p := customer(t)
	if got := policy.NoticeInForce(p, time.Hour); got != 336*time.Hour {
		t.Errorf("NoticeInForce(policy 336h, function 1h) = %v", got)
	}
	if got := policy.NoticeInForce(p, 30*domain.Day); got != 30*domain.Day {
		t.Errorf("NoticeInForce(policy 336h, function 720h) = %v", got)
	}
	if got := policy.NoticeInForce(nil, time.Hour); got != time.Hour {
		t.Errorf("NoticeInForce(no policy, function 1h) = %v", got)
	}
}
