package policy_test

import (
	"strings"
	"testing"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

func TestReschedule_EC2Rules(t *testing.T) {
	p := customer(t)
	noReschedule := compile(t, windowsOf("Europe/Berlin", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR 22:00 6h"))
	announced := win("2026-11-20T21:00:00Z", "2026-11-21T01:00:00Z") // Friday 22:00 Berlin, 4h
	rec := domain.Record{State: domain.StatePending, Window: &announced}
	stored := utc("2026-11-18T12:00:00Z")
	move := func(start, end string) domain.Command {
		w := domain.Window{Start: utc(start)}
		if end != "" {
			w.End = utc(end)
		}
		return domain.Command{ID: "r1", ResourceID: scope + "/c1", Task: domain.TaskReschedule, Window: &w}
	}
	cases := []struct {
		name     string
		r        domain.Record
		c        domain.Command
		storedAt time.Time
		p        *policy.Policy
		deadline time.Time
		want     domain.Window // when accepted
		code     domain.Code
		target   string
	}{
		{name: "to Monday, with an end", r: rec, c: move("2026-11-23T21:00:00Z", "2026-11-24T02:00:00Z"), storedAt: stored, p: p,
			want: win("2026-11-23T21:00:00Z", "2026-11-24T02:00:00Z")},
		{name: "without an end the length is kept", r: rec, c: move("2026-11-23T22:00:00Z", ""), storedAt: stored, p: p,
			want: win("2026-11-23T22:00:00Z", "2026-11-24T02:00:00Z")},
		{name: "inside the policy's notice: the customer chose", r: rec, c: move("2026-11-18T21:00:00Z", ""), storedAt: stored, p: p,
			want: win("2026-11-18T21:00:00Z", "2026-11-19T01:00:00Z")},
		{name: "exactly an hour ahead", r: rec, c: move("2026-11-18T22:00:00Z", ""), storedAt: utc("2026-11-18T21:00:00Z"), p: p,
			want: win("2026-11-18T22:00:00Z", "2026-11-19T02:00:00Z")},
		{name: "ending at the deadline", r: rec, c: move("2026-11-23T21:00:00Z", ""), storedAt: stored, p: p, deadline: utc("2026-11-24T01:00:00Z"),
			want: win("2026-11-23T21:00:00Z", "2026-11-24T01:00:00Z")},
		{name: "no window", r: rec, c: domain.Command{ID: "r1", Task: domain.TaskReschedule}, storedAt: stored, p: p, code: domain.CodeInvalidParameter, target: "window.start"},
		{name: "an end before the start", r: rec, c: move("2026-11-23T21:00:00Z", "2026-11-23T20:00:00Z"), storedAt: stored, p: p, code: domain.CodeInvalidParameter, target: "window.end"},
		{name: "not Pending", r: domain.Record{State: domain.StatePlanned, Window: &announced}, c: move("2026-11-23T21:00:00Z", ""), storedAt: stored, p: p, code: domain.CodeRequestNotAllowed, target: "task"},
		{name: "Pending without a window", r: domain.Record{State: domain.StatePending}, c: move("2026-11-23T21:00:00Z", ""), storedAt: stored, p: p, code: domain.CodeRequestNotAllowed, target: "task"},
		{name: "updating", r: domain.Record{State: domain.StatePending, Window: &announced, Updating: true}, c: move("2026-11-23T21:00:00Z", ""), storedAt: stored, p: p, code: domain.CodeRequestNotAllowed, target: "task"},
		{name: "no policy", r: rec, c: move("2026-11-23T21:00:00Z", ""), storedAt: stored, p: nil, code: domain.CodeRequestNotAllowed, target: "policy.allowReschedule"},
		{name: "a policy that does not allow it", r: rec, c: move("2026-11-23T21:00:00Z", ""), storedAt: stored, p: noReschedule, code: domain.CodeRequestNotAllowed, target: "policy.allowReschedule"},
		{name: "less than an hour ahead", r: rec, c: move("2026-11-18T21:59:59Z", ""), storedAt: utc("2026-11-18T21:00:00Z"), p: p, code: domain.CodeInvalidParameter, target: "window.start"},
		{name: "the announced window starts within 5 minutes", r: rec, c: move("2026-11-23T21:00:00Z", ""), storedAt: utc("2026-11-20T20:55:00Z"), p: p, code: domain.CodeInvalidParameter, target: "window.start"},
		{name: "the announced window starts just over 5 minutes later", r: rec, c: move("2026-11-23T21:00:00Z", ""), storedAt: utc("2026-11-20T20:54:59Z"), p: p,
			want: win("2026-11-23T21:00:00Z", "2026-11-24T01:00:00Z")},
		{name: "to a Saturday", r: rec, c: move("2026-11-21T21:00:00Z", ""), storedAt: stored, p: p, code: domain.CodeInvalidParameter, target: "window"},
		{name: "into the freeze", r: rec, c: move("2026-12-21T21:00:00Z", ""), storedAt: stored, p: p, code: domain.CodeInvalidParameter, target: "window"},
		{name: "past the campaign's deadline", r: rec, c: move("2026-11-23T21:00:00Z", ""), storedAt: stored, p: p, deadline: utc("2026-11-24T00:59:59Z"), code: domain.CodeInvalidParameter, target: "window.end"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, rej := policy.Reschedule(c.r, c.c, c.storedAt, c.p, c.deadline)
			if c.code == "" {
				if rej != nil || !got.Start.Equal(c.want.Start) || !got.End.Equal(c.want.End) {
					t.Errorf("Reschedule = %v, %v; want %v", got, rej, c.want)
				}
				return
			}
			if rej == nil || rej.Code != c.code || rej.Target != c.target || rej.Message == "" {
				t.Errorf("Reschedule = %v, %v; want %s on %q", got, rej, c.code, c.target)
			}
		})
	}
}

func TestReschedule_RefusalNamesTheNextAllowedStart(t *testing.T) {
	announced := win("2026-11-20T21:00:00Z", "2026-11-21T01:00:00Z")
	w := win("2026-11-21T21:00:00Z", "2026-11-22T01:00:00Z")
	c := domain.Command{ID: "r1", Task: domain.TaskReschedule, Window: &w}
	_, rej := policy.Reschedule(domain.Record{State: domain.StatePending, Window: &announced}, c, utc("2026-11-18T12:00:00Z"), customer(t), time.Time{})
	if rej == nil || !strings.Contains(rej.Message, "2026-11-23T21:00:00Z") {
		t.Errorf("Reschedule to a Saturday: %v; want the next allowed start, Monday 22:00 Berlin", rej)
	}
}
