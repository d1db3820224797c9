package policy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// berlin: weekdays 22:00 for 6h in Europe/Berlin, with the given blackouts (by default the
// holiday freeze of the contract's example).
func berlin(t testing.TB, blackouts ...string) *policy.Policy {
	t.Helper()
	if len(blackouts) == 0 {
		blackouts = []string{blackout("2026-12-20", "2027-01-04")}
	}
	return compile(t, windowsOf("Europe/Berlin", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR 22:00 6h")+`, "blackouts": [`+strings.Join(blackouts, ",")+`]`)
}

func win(start, end string) domain.Window { return domain.Window{Start: utc(start), End: utc(end)} }

func TestInBlackout_LocalDatesEndExclusive(t *testing.T) {
	p := berlin(t, blackout("2026-12-20", "2027-01-04"), blackout("2026-07-01", "2026-07-02"))
	cases := []struct {
		at   string
		want bool
	}{
		{"2026-12-19T22:59:59Z", false}, // 23:59:59 on the 19th, Berlin (CET)
		{"2026-12-19T23:00:00Z", true},  // midnight starting the 20th
		{"2027-01-03T22:59:59Z", true},  // the last second of the 3rd
		{"2027-01-03T23:00:00Z", false}, // the 4th: end exclusive
		{"2026-06-30T21:59:59Z", false}, // summer time: midnight is 22:00Z
		{"2026-06-30T22:00:00Z", true},
		{"2026-07-01T21:59:59Z", true},
		{"2026-07-01T22:00:00Z", false},
	}
	for _, c := range cases {
		if got := p.InBlackout(utc(c.at)); got != c.want {
			t.Errorf("InBlackout(%s) = %v, want %v", c.at, got, c.want)
		}
	}
}

func TestInAllowedWindow_StartInclusiveEndExclusive(t *testing.T) {
	p := berlin(t)
	cases := []struct {
		at   string
		want bool
	}{
		{"2026-11-20T20:59:59Z", false}, // Friday 21:59:59 CET
		{"2026-11-20T21:00:00Z", true},  // Friday 22:00
		{"2026-11-21T02:59:59Z", true},  // Saturday 03:59:59, still Friday's window
		{"2026-11-21T03:00:00Z", false}, // Saturday 04:00: end exclusive
		{"2026-11-21T21:00:00Z", false}, // Saturday 22:00: no window on weekends
		{"2026-12-22T22:00:00Z", true},  // inside a window, even in the blackout (InBlackout says that)
	}
	for _, c := range cases {
		if got := p.InAllowedWindow(utc(c.at)); got != c.want {
			t.Errorf("InAllowedWindow(%s) = %v, want %v", c.at, got, c.want)
		}
	}
	if none := compile(t, ""); !none.InAllowedWindow(utc("2026-11-21T12:00:00Z")) {
		t.Error("a policy without windows allows work at any time")
	}
}

func TestAllows_InsideOneOccurrenceAndNoBlackout(t *testing.T) {
	p := berlin(t, blackout("2026-12-19", "2027-01-04"))
	daily := compile(t, windowsOf("UTC", "FREQ=DAILY 00:00 24h"))
	open := compile(t, `, "blackouts": [`+blackout("2026-12-20", "2027-01-04")+`]`)
	cases := []struct {
		name string
		p    *policy.Policy
		w    domain.Window
		want bool
	}{
		{"a whole occurrence", p, win("2026-11-20T21:00:00Z", "2026-11-21T03:00:00Z"), true},
		{"inside an occurrence", p, win("2026-11-20T22:00:00Z", "2026-11-21T02:00:00Z"), true},
		{"one second early", p, win("2026-11-20T20:59:59Z", "2026-11-21T01:00:00Z"), false},
		{"one second late", p, win("2026-11-20T22:00:00Z", "2026-11-21T03:00:01Z"), false},
		{"on a weekend", p, win("2026-11-21T21:00:00Z", "2026-11-22T01:00:00Z"), false},
		{"after the change to summer time, at 22:00 CEST", p, win("2026-03-30T20:00:00Z", "2026-03-31T02:00:00Z"), true},
		{"at 22:00 CET after the change (23:00 CEST)", p, win("2026-03-30T21:00:00Z", "2026-03-31T03:00:00Z"), false},
		{"an occurrence's part before the blackout", p, win("2026-12-18T21:00:00Z", "2026-12-18T23:00:00Z"), true},
		{"into the blackout", p, win("2026-12-18T21:00:00Z", "2026-12-18T23:00:01Z"), false},
		{"an occurrence's part after the blackout", p, win("2027-01-04T21:00:00Z", "2027-01-05T01:00:00Z"), true},
		{"two touching occurrences are not one", daily, win("2026-11-20T20:00:00Z", "2026-11-21T04:00:00Z"), false},
		{"a whole day of a 24h window", daily, win("2026-11-20T00:00:00Z", "2026-11-21T00:00:00Z"), true},
		{"no windows: any time", open, win("2026-11-21T03:00:00Z", "2026-11-28T03:00:00Z"), true},
		{"no windows: not in a blackout (UTC dates)", open, win("2026-12-18T00:00:00Z", "2026-12-20T00:00:01Z"), false},
		{"no windows: ending where the blackout starts", open, win("2026-12-18T00:00:00Z", "2026-12-20T00:00:00Z"), true},
		{"an empty window", open, win("2026-11-20T00:00:00Z", "2026-11-20T00:00:00Z"), false},
	}
	for _, c := range cases {
		if got := c.p.Allows(c.w); got != c.want {
			t.Errorf("%s: Allows(%v) = %v, want %v (%s)", c.name, c.w, got, c.want, c.p.Why(c.w))
		}
	}
}

func TestNextAllowed_AcrossBlackoutsAndDaylightSaving(t *testing.T) {
	p := berlin(t, blackout("2026-12-19", "2027-01-05"))
	sat := compile(t, windowsOf("Europe/Berlin", "FREQ=WEEKLY;BYDAY=SA 22:00 6h"))
	open := compile(t, `, "blackouts": [`+blackout("2026-12-20", "2027-01-04")+`]`)
	cases := []struct {
		name      string
		p         *policy.Policy
		length    time.Duration
		notBefore string
		want      string // "" for none
	}{
		{"the next weekday at 22:00", p, 4 * time.Hour, "2026-11-18T12:00:00Z", "2026-11-18T21:00:00Z"},
		{"inside an occurrence: notBefore itself", p, 4 * time.Hour, "2026-11-18T22:00:00Z", "2026-11-18T22:00:00Z"},
		{"too late in the occurrence: the next one", p, 4 * time.Hour, "2026-11-18T23:00:01Z", "2026-11-19T21:00:00Z"},
		{"the part of an occurrence before a blackout", p, 2 * time.Hour, "2026-12-18T12:00:00Z", "2026-12-18T21:00:00Z"},
		{"too short before the blackout: the part after it", p, 3 * time.Hour, "2026-12-18T12:00:00Z", "2027-01-04T23:00:00Z"},
		{"across the change to summer time", p, 6 * time.Hour, "2026-03-28T00:00:00Z", "2026-03-30T20:00:00Z"},
		{"across the change back", p, 6 * time.Hour, "2026-10-24T00:00:00Z", "2026-10-26T21:00:00Z"},
		{"a window over the change keeps 6h of elapsed time", sat, 6 * time.Hour, "2026-03-28T00:00:00Z", "2026-03-28T21:00:00Z"},
		{"longer than any window", sat, 6*time.Hour + time.Second, "2026-03-28T00:00:00Z", ""},
		{"no windows: now", open, 4 * time.Hour, "2026-12-01T10:00:00Z", "2026-12-01T10:00:00Z"},
		{"no windows: after the blackout it would overlap", open, 4 * time.Hour, "2026-12-19T20:00:01Z", "2027-01-04T00:00:00Z"},
		{"no windows: right up to the blackout", open, 4 * time.Hour, "2026-12-19T20:00:00Z", "2026-12-19T20:00:00Z"},
		{"no length", open, 0, "2026-12-01T10:00:00Z", ""},
	}
	for _, c := range cases {
		got, ok := c.p.NextAllowed(c.length, utc(c.notBefore))
		if c.want == "" {
			if ok {
				t.Errorf("%s: NextAllowed = %s, want none", c.name, got.UTC().Format(time.RFC3339))
			}
			continue
		}
		if !ok || !got.Equal(utc(c.want)) {
			t.Errorf("%s: NextAllowed(%s, %s) = %s, %v; want %s", c.name, c.length, c.notBefore, got.UTC().Format(time.RFC3339), ok, c.want)
		}
	}
}

func TestNextAllowed_IsTheEarliestStartThatAllows(t *testing.T) {
	// Against a scan minute by minute: every answer is minute-aligned when notBefore is, since
	// it is notBefore, an occurrence's start or a blackout's end.
	policies := map[string]*policy.Policy{
		"weekdays with a freeze": berlin(t, blackout("2026-03-25", "2026-03-27")),
		"two overlapping rules":  compile(t, windowsOf("Europe/Berlin", "FREQ=DAILY 23:00 3h", "FREQ=WEEKLY;BYDAY=SU 01:30 5h")+`, "blackouts": [`+blackout("2026-03-29", "2026-03-30")+`]`),
		"monthly in New York":    compile(t, windowsOf("America/New_York", "FREQ=MONTHLY;BYMONTHDAY=8,9,10 01:30 2h")),
	}
	from := utc("2026-03-05T00:00:00Z")
	for name, p := range policies {
		for _, length := range []time.Duration{time.Hour, 150 * time.Minute} {
			for nb := from; nb.Before(from.Add(10 * 24 * time.Hour)); nb = nb.Add(241 * time.Minute) {
				want := time.Time{}
				for s := nb; s.Before(nb.Add(40 * 24 * time.Hour)); s = s.Add(time.Minute) {
					if p.Allows(domain.Window{Start: s, End: s.Add(length)}) {
						want = s
						break
					}
				}
				got, ok := p.NextAllowed(length, nb)
				if ok != !want.IsZero() || !got.Equal(want) {
					t.Fatalf("%s: NextAllowed(%s, %s) = %s, %v; the scan finds %s", name, length, nb.Format(time.RFC3339), got.Format(time.RFC3339), ok, want.Format(time.RFC3339))
				}
			}
		}
	}
}

func TestNextAllowedAligned_FirstSlotThatAllows(t *testing.T) {
	p := berlin(t, blackout("2026-12-19", "2027-01-05"))
	origin := utc("2026-12-01T00:07:00Z")
	// The freeze starts at 23:00Z on Friday the 18th, two hours into that night's window, and
	// ends at 23:00Z on Monday 4 January, two hours into that night's.
	cases := []struct {
		length    time.Duration
		notBefore string
		want      string // "" for none
	}{
		{time.Hour, "2026-12-18T12:00:00Z", "2026-12-18T21:07:00Z"},
		{2 * time.Hour, "2026-12-18T12:00:00Z", "2027-01-04T23:07:00Z"}, // 21:07 + 2h runs into the freeze
		{4 * time.Hour, "2026-12-18T12:00:00Z", "2027-01-05T21:07:00Z"}, // 23:07 + 4h passes 03:00Z on the 5th
		{6 * time.Hour, "2026-12-18T12:00:00Z", ""},                     // a 6h window fits only at 22:00 sharp, off this grid
	}
	for _, c := range cases {
		got, ok := p.NextAllowedAligned(c.length, utc(c.notBefore), origin, 15*time.Minute)
		if c.want == "" {
			if ok {
				t.Errorf("NextAllowedAligned(%s) = %s, want none", c.length, got.UTC().Format(time.RFC3339))
			}
			continue
		}
		if !ok || !got.Equal(utc(c.want)) {
			t.Errorf("NextAllowedAligned(%s, %s) = %s, %v; want %s", c.length, c.notBefore, got.UTC().Format(time.RFC3339), ok, c.want)
		}
	}
	if _, ok := p.NextAllowedAligned(time.Hour, origin, origin, 0); ok {
		t.Error("a grid without a step has no slot")
	}
}

func TestWhy_SaysWhichRuleRefuses(t *testing.T) {
	p := compile(t, windowsOf("Europe/Berlin", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR 22:00 6h")+`, "blackouts": [{"start": "2026-12-20", "end": "2027-01-04", "reason": "holiday freeze"}]`)
	for w, want := range map[domain.Window]string{
		win("2026-12-21T21:00:00Z", "2026-12-21T23:00:00Z"): `overlaps the blackout 2026-12-20 to 2027-01-04 (end exclusive) "holiday freeze"`,
		win("2026-11-21T21:00:00Z", "2026-11-21T23:00:00Z"): "is not inside one occurrence of an allowed window",
		win("2026-11-20T21:00:00Z", "2026-11-20T23:00:00Z"): "",
	} {
		if got := p.Why(w); got != want {
			t.Errorf("Why(%v) = %q, want %q", w, got, fmt.Sprint(want))
		}
	}
}

func TestPolicy_SafeForConcurrentUse(t *testing.T) {
	// One compiled policy serves a planner's goroutines: each month is computed by one of them
	// and read by all, and every answer is the one a policy of its own gives.
	shared := berlin(t)
	const workers, queries = 4, 400
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			own := berlin(t)
			for i := range queries {
				at := utc("2026-01-01T00:00:00Z").Add(time.Duration(i*workers+w) * 31 * time.Hour) // about 6 years: the cache restarts
				got, ok := shared.NextAllowed(4*time.Hour, at)
				want, wantOK := own.NextAllowed(4*time.Hour, at)
				if ok != wantOK || !got.Equal(want) {
					errs <- fmt.Errorf("NextAllowed(%s) = %s on the shared policy, %s on its own", at, got, want)
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
