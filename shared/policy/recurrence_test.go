package policy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

const scope = "/subscriptions/0b1f/resourceGroups/rg-1"

// compile builds a policy of scope with the given JSON fields after "scope".
func compile(t testing.TB, fields string) *policy.Policy {
	t.Helper()
	body := fmt.Sprintf(`{"scope": %q%s}`, scope, fields)
	doc, rej := policy.Decode([]byte(body))
	if rej != nil {
		t.Fatalf("Decode(%s): %v", body, rej)
	}
	p, rej := doc.Compile()
	if rej != nil {
		t.Fatalf("Compile(%s): %v", body, rej)
	}
	return p
}

func windowsOf(tz string, rules ...string) string {
	var ws []string
	for _, r := range rules {
		parts := strings.Fields(r) // "RULE HH:MM DURATION"
		ws = append(ws, fmt.Sprintf(`{"rrule": %q, "start": %q, "duration": %q}`, parts[0], parts[1], parts[2]))
	}
	return fmt.Sprintf(`, "timeZone": %q, "windows": [%s]`, tz, strings.Join(ws, ","))
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// occ renders occurrences as "start/end" in UTC, then the local wall clocks, to compare.
func occ(ws []domain.Window, loc *time.Location) []string {
	var out []string
	for _, w := range ws {
		out = append(out, fmt.Sprintf("%s/%s %s-%s", w.Start.UTC().Format("2006-01-02T15:04Z"), w.End.UTC().Format("2006-01-02T15:04Z"),
			w.Start.In(loc).Format("Mon 15:04 MST"), w.End.In(loc).Format("15:04 MST")))
	}
	return out
}

func TestOccurrences_FollowTheRuleInTheLocalTimeZone(t *testing.T) {
	cases := []struct {
		name     string
		tz, rule string
		from, to string
		want     []string
	}{
		{
			name: "weekdays 22:00 6h in Berlin: the UTC start moves an hour earlier after the last Sunday of March",
			tz:   "Europe/Berlin", rule: "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR 22:00 6h",
			from: "2026-03-26T00:00:00Z", to: "2026-03-31T00:00:00Z",
			want: []string{
				"2026-03-26T21:00Z/2026-03-27T03:00Z Thu 22:00 CET-04:00 CET",
				"2026-03-27T21:00Z/2026-03-28T03:00Z Fri 22:00 CET-04:00 CET",
				"2026-03-30T20:00Z/2026-03-31T02:00Z Mon 22:00 CEST-04:00 CEST",
			},
		},
		{
			name: "weekdays 22:00 6h in Berlin: the UTC start moves an hour later after the last Sunday of October",
			tz:   "Europe/Berlin", rule: "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR 22:00 6h",
			from: "2026-10-23T00:00:00Z", to: "2026-10-27T00:00:00Z",
			want: []string{
				"2026-10-23T20:00Z/2026-10-24T02:00Z Fri 22:00 CEST-04:00 CEST",
				"2026-10-26T21:00Z/2026-10-27T03:00Z Mon 22:00 CET-04:00 CET",
			},
		},
		{
			name: "a window across the change in March lasts 6h of elapsed time: it ends at 05:00 local",
			tz:   "Europe/Berlin", rule: "FREQ=WEEKLY;BYDAY=SA 22:00 6h",
			from: "2026-03-28T00:00:00Z", to: "2026-03-29T00:00:00Z",
			want: []string{"2026-03-28T21:00Z/2026-03-29T03:00Z Sat 22:00 CET-05:00 CEST"},
		},
		{
			name: "a window across the change in October lasts 6h of elapsed time: it ends at 03:00 local",
			tz:   "Europe/Berlin", rule: "FREQ=WEEKLY;BYDAY=SA 22:00 6h",
			from: "2026-10-24T00:00:00Z", to: "2026-10-25T00:00:00Z",
			want: []string{"2026-10-24T20:00Z/2026-10-25T02:00Z Sat 22:00 CEST-03:00 CET"},
		},
		{
			name: "BYDAY=-1SU: the last Sunday of each month; 02:30 skipped in March is 03:30 summer time, 02:30 twice in October is the first",
			tz:   "Europe/Berlin", rule: "FREQ=MONTHLY;BYDAY=-1SU 02:30 4h",
			from: "2026-02-01T00:00:00Z", to: "2026-11-01T00:00:00Z",
			want: []string{
				"2026-02-22T01:30Z/2026-02-22T05:30Z Sun 02:30 CET-06:30 CET",
				"2026-03-29T01:30Z/2026-03-29T05:30Z Sun 03:30 CEST-07:30 CEST",
				"2026-04-26T00:30Z/2026-04-26T04:30Z Sun 02:30 CEST-06:30 CEST",
				"2026-05-31T00:30Z/2026-05-31T04:30Z Sun 02:30 CEST-06:30 CEST",
				"2026-06-28T00:30Z/2026-06-28T04:30Z Sun 02:30 CEST-06:30 CEST",
				"2026-07-26T00:30Z/2026-07-26T04:30Z Sun 02:30 CEST-06:30 CEST",
				"2026-08-30T00:30Z/2026-08-30T04:30Z Sun 02:30 CEST-06:30 CEST",
				"2026-09-27T00:30Z/2026-09-27T04:30Z Sun 02:30 CEST-06:30 CEST",
				"2026-10-25T00:30Z/2026-10-25T04:30Z Sun 02:30 CEST-05:30 CET",
			},
		},
		{
			name: "BYDAY=1SA: the first Saturday of each month",
			tz:   "UTC", rule: "FREQ=MONTHLY;BYDAY=1SA 08:00 8h",
			from: "2026-01-01T00:00:00Z", to: "2026-06-01T00:00:00Z",
			want: []string{
				"2026-01-03T08:00Z/2026-01-03T16:00Z Sat 08:00 UTC-16:00 UTC",
				"2026-02-07T08:00Z/2026-02-07T16:00Z Sat 08:00 UTC-16:00 UTC",
				"2026-03-07T08:00Z/2026-03-07T16:00Z Sat 08:00 UTC-16:00 UTC",
				"2026-04-04T08:00Z/2026-04-04T16:00Z Sat 08:00 UTC-16:00 UTC",
				"2026-05-02T08:00Z/2026-05-02T16:00Z Sat 08:00 UTC-16:00 UTC",
			},
		},
		{
			name: "INTERVAL=2 weekly: the weeks an even number of weeks from the week of the anchor, 2001-01-01",
			tz:   "UTC", rule: "FREQ=WEEKLY;INTERVAL=2;BYDAY=SA 00:00 24h",
			from: "2026-01-01T00:00:00Z", to: "2026-03-01T00:00:00Z",
			want: []string{
				"2026-01-03T00:00Z/2026-01-04T00:00Z Sat 00:00 UTC-00:00 UTC",
				"2026-01-17T00:00Z/2026-01-18T00:00Z Sat 00:00 UTC-00:00 UTC",
				"2026-01-31T00:00Z/2026-02-01T00:00Z Sat 00:00 UTC-00:00 UTC",
				"2026-02-14T00:00Z/2026-02-15T00:00Z Sat 00:00 UTC-00:00 UTC",
				"2026-02-28T00:00Z/2026-03-01T00:00Z Sat 00:00 UTC-00:00 UTC",
			},
		},
		{
			name: "INTERVAL=3 daily counts days from the anchor",
			tz:   "UTC", rule: "FREQ=DAILY;INTERVAL=3 12:00 1h",
			from: "2026-01-01T00:00:00Z", to: "2026-01-12T00:00:00Z",
			want: []string{
				"2026-01-02T12:00Z/2026-01-02T13:00Z Fri 12:00 UTC-13:00 UTC",
				"2026-01-05T12:00Z/2026-01-05T13:00Z Mon 12:00 UTC-13:00 UTC",
				"2026-01-08T12:00Z/2026-01-08T13:00Z Thu 12:00 UTC-13:00 UTC",
				"2026-01-11T12:00Z/2026-01-11T13:00Z Sun 12:00 UTC-13:00 UTC",
			},
		},
		{
			name: "INTERVAL=2 monthly counts months from January 2001",
			tz:   "UTC", rule: "FREQ=MONTHLY;INTERVAL=2;BYMONTHDAY=1 00:00 12h",
			from: "2026-01-01T00:00:00Z", to: "2026-06-01T00:00:00Z",
			want: []string{
				"2026-01-01T00:00Z/2026-01-01T12:00Z Thu 00:00 UTC-12:00 UTC",
				"2026-03-01T00:00Z/2026-03-01T12:00Z Sun 00:00 UTC-12:00 UTC",
				"2026-05-01T00:00Z/2026-05-01T12:00Z Fri 00:00 UTC-12:00 UTC",
			},
		},
		{
			name: "BYMONTHDAY=31 skips the months without one; -1 is the last day",
			tz:   "UTC", rule: "FREQ=MONTHLY;BYMONTHDAY=31,-1 06:00 2h",
			from: "2026-01-01T00:00:00Z", to: "2026-05-01T00:00:00Z",
			want: []string{
				"2026-01-31T06:00Z/2026-01-31T08:00Z Sat 06:00 UTC-08:00 UTC",
				"2026-02-28T06:00Z/2026-02-28T08:00Z Sat 06:00 UTC-08:00 UTC",
				"2026-03-31T06:00Z/2026-03-31T08:00Z Tue 06:00 UTC-08:00 UTC",
				"2026-04-30T06:00Z/2026-04-30T08:00Z Thu 06:00 UTC-08:00 UTC",
			},
		},
		{
			name: "across the turn of a year, in the local zone: Dec 31 22:00 in Tokyo is 13:00Z",
			tz:   "Asia/Tokyo", rule: "FREQ=DAILY 22:00 4h",
			from: "2026-12-30T14:00:00Z", to: "2027-01-01T14:00:00Z",
			want: []string{
				"2026-12-31T13:00Z/2026-12-31T17:00Z Thu 22:00 JST-02:00 JST",
				"2027-01-01T13:00Z/2027-01-01T17:00Z Fri 22:00 JST-02:00 JST",
			},
		},
		{
			name: "two rules merge by start",
			tz:   "UTC", rule: "FREQ=WEEKLY;BYDAY=SU 10:00 2h|FREQ=WEEKLY;BYDAY=SU,MO 01:00 1h",
			from: "2026-01-04T00:00:00Z", to: "2026-01-06T00:00:00Z",
			want: []string{
				"2026-01-04T01:00Z/2026-01-04T02:00Z Sun 01:00 UTC-02:00 UTC",
				"2026-01-04T10:00Z/2026-01-04T12:00Z Sun 10:00 UTC-12:00 UTC",
				"2026-01-05T01:00Z/2026-01-05T02:00Z Mon 01:00 UTC-02:00 UTC",
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := compile(t, windowsOf(c.tz, strings.Split(c.rule, "|")...))
			got := occ(p.Occurrences(utc(c.from), utc(c.to)), p.Location())
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("occurrences:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

func TestOccurrences_SameWhateverTheQueryOrder(t *testing.T) {
	// The cache fills year by year in the order queries come; the answers must not depend on it.
	rule := windowsOf("Europe/Berlin", "FREQ=WEEKLY;INTERVAL=3;BYDAY=TU,SA 23:30 5h")
	a, b := compile(t, rule), compile(t, rule)
	from, to := utc("2025-06-01T00:00:00Z"), utc("2028-06-01T00:00:00Z")
	b.Occurrences(utc("2031-01-01T00:00:00Z"), utc("2031-02-01T00:00:00Z"))
	got, want := occ(b.Occurrences(from, to), b.Location()), occ(a.Occurrences(from, to), a.Location())
	if strings.Join(got, "\n") != strings.Join(want, "\n") || len(want) < 100 {
		t.Errorf("%d occurrences after another query, %d fresh", len(got), len(want))
	}
}
