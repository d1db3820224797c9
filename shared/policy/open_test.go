package policy_test

import (
	"strings"
	"testing"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

func TestCheckOpen_48HoursIn32DaysInStretchesOf4Hours(t *testing.T) {
	// Set on 2026-06-01; the rule looks at the 365 days from then.
	cases := []struct {
		name   string
		fields string
		open   bool
	}{
		{"no windows, no blackouts", ``, true},
		{"weekdays 22:00 for 6h", windowsOf("Europe/Berlin", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR 22:00 6h"), true},
		{"only 3h windows, however many, do not count", windowsOf("UTC", "FREQ=DAILY 01:00 3h", "FREQ=DAILY 13:00 3h"), false},
		{"daily 4h windows count", windowsOf("UTC", "FREQ=DAILY 01:00 4h"), true},
		{"two touching 2h windows make one 4h stretch", windowsOf("UTC", "FREQ=DAILY 00:00 2h", "FREQ=DAILY 02:00 2h"), true},
		{"two 2h windows a minute apart do not", windowsOf("UTC", "FREQ=DAILY 00:00 2h", "FREQ=DAILY 02:01 2h"), false},
		{"Saturdays 12h: four in every 32 days, exactly 48h", windowsOf("UTC", "FREQ=WEEKLY;BYDAY=SA 08:00 12h"), true},
		{"Saturdays 11h: 44h", windowsOf("UTC", "FREQ=WEEKLY;BYDAY=SA 08:00 11h"), false},
		{"the first Saturday of the month, 24h", windowsOf("UTC", "FREQ=MONTHLY;BYDAY=1SA 00:00 24h"), false},
		{"every other week, weekdays 6h", windowsOf("UTC", "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,TU,WE,TH,FR 22:00 6h"), true},
		{"weekdays 6h with a two-week freeze", windowsOf("Europe/Berlin", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR 22:00 6h") + `, "blackouts": [` + blackout("2026-12-20", "2027-01-04") + `]`, true},
		{"weekdays 6h with a 31-day blackout", windowsOf("Europe/Berlin", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR 22:00 6h") + `, "blackouts": [` + blackout("2026-12-01", "2027-01-01") + `]`, false},
		{"weekdays 6h with blackouts back to back", windowsOf("UTC", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR 22:00 6h") + `, "blackouts": [` + blackout("2026-09-01", "2026-09-16") + `,` + blackout("2026-09-16", "2026-10-01") + `]`, false},
		{"no windows, a 29-day blackout: 72h", `, "blackouts": [` + blackout("2026-09-01", "2026-09-30") + `]`, true},
		{"no windows, a 31-day blackout: 24h", `, "blackouts": [` + blackout("2026-09-01", "2026-10-02") + `]`, false},
		{"a long blackout beyond the year counts not", `, "blackouts": [` + blackout("2027-07-01", "2027-09-01") + `]`, true},
		{"a long blackout that starts before the year ends counts", `, "blackouts": [` + blackout("2027-05-01", "2027-07-01") + `]`, false},
		{"daily 21:00 for 5h", windowsOf("UTC", "FREQ=DAILY 21:00 5h"), true},
		{"the same, with one-day blackouts every other day that cut each stretch to 3h or 2h", windowsOf("UTC", "FREQ=DAILY 21:00 5h") + `, "blackouts": [` + strings.Join(everyOtherDay("2026-09-01", 16), ",") + `]`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rej := compile(t, c.fields).CheckOpen(setAt)
			if c.open && rej != nil {
				t.Errorf("CheckOpen: %v", rej)
			}
			if !c.open && (rej == nil || rej.Code != domain.CodeInvalidParameter || rej.Target != "windows") {
				t.Errorf("CheckOpen = %v, want InvalidParameter on windows", rej)
			}
		})
	}
}

// everyOtherDay is n one-day blackouts, from the date first, a day apart.
func everyOtherDay(first string, n int) []string {
	d, _ := time.Parse(time.DateOnly, first)
	var out []string
	for range n {
		out = append(out, blackout(d.Format(time.DateOnly), d.AddDate(0, 0, 1).Format(time.DateOnly)))
		d = d.AddDate(0, 0, 2)
	}
	return out
}

func TestCheckOpen_NamesTheWorstSpan(t *testing.T) {
	p := compile(t, windowsOf("UTC", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR 22:00 6h")+`, "blackouts": [`+blackout("2026-12-01", "2027-01-01")+`]`)
	rej := p.CheckOpen(setAt)
	if rej == nil {
		t.Fatal("a 31-day blackout passed the 48/32 rule")
	}
	// The worst span starts where a stretch's edge meets it, near the blackout.
	if !strings.Contains(rej.Message, "in the 32 days from 2026-11-") || !strings.Contains(rej.Message, "at least 48h") {
		t.Errorf("message %q does not name the span around the blackout", rej.Message)
	}
	if policy.MinOpen.Hours() != 48 || policy.MinStretch.Hours() != 4 || policy.OpenSpan.Hours() != 32*24 {
		t.Error("the 48/32 constants are not the contract's")
	}
}
