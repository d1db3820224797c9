package policy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

var setAt = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

const weekdays = `{"rrule": "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "start": "22:00", "duration": "6h"}`

func window(rule, start, dur string) string {
	return fmt.Sprintf(`{"rrule": %q, "start": %q, "duration": %q}`, rule, start, dur)
}

func blackout(start, end string) string {
	return fmt.Sprintf(`{"start": %q, "end": %q}`, start, end)
}

func repeat(s string, n int) string { return strings.TrimSuffix(strings.Repeat(s+",", n), ",") }

func TestParse_AcceptsTheDocumentOfTheContract(t *testing.T) {
	body := `{"scope": "/subscriptions/0b1f/resourceGroups/rg-1", "timeZone": "Europe/Berlin",
	 "windows": [{"rrule": "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "start": "22:00", "duration": "6h"}],
	 "blackouts": [{"start": "2026-12-20", "end": "2027-01-04", "reason": "holiday freeze"}],
	 "minNotice": "336h", "allowReschedule": true}`
	p, rej := policy.Parse([]byte(body), setAt)
	if rej != nil {
		t.Fatalf("Parse: %v", rej)
	}
	if p.MinNotice() != 336*time.Hour || !p.AllowReschedule() || !p.HasWindows() || p.Location().String() != "Europe/Berlin" ||
		p.Scope().Level != policy.LevelResourceGroup {
		t.Errorf("policy read as minNotice %v, allowReschedule %v, windows %v, zone %v, scope %+v",
			p.MinNotice(), p.AllowReschedule(), p.HasWindows(), p.Location(), p.Scope())
	}
	stored, err := p.Document().Encode()
	if err != nil {
		t.Fatal(err)
	}
	again, err := policy.ParseStored(stored)
	if err != nil || fmt.Sprint(again.Document()) != fmt.Sprint(p.Document()) {
		t.Errorf("stored %s read back as %+v, %v", stored, again.Document(), err)
	}
}

func TestParse_RefusesEachMalformedFieldWithItsTarget(t *testing.T) {
	cases := []struct {
		name, fields string // after "scope"; a leading "!" replaces the whole body
		code         domain.Code
		target       string
	}{
		{"not JSON", "!{", domain.CodeInvalidRequestContent, ""},
		{"not UTF-8", "!{\"scope\": \"\xff\"}", domain.CodeInvalidRequestContent, ""},
		{"too large", "!{\"scope\": \"" + strings.Repeat("a", policy.MaxDocumentBytes) + "\"}", domain.CodeInvalidRequestContent, ""},
		{"not an object", "![1]", domain.CodeInvalidParameter, "policy"},
		{"two objects", `!{"scope": "/subscriptions/a"} {}`, domain.CodeInvalidRequestContent, ""},
		{"unknown field", `, "owner": "me"`, domain.CodeInvalidParameter, "owner"},
		{"field in another casing", `, "TimeZone": "UTC"`, domain.CodeInvalidParameter, "TimeZone"},
		{"field given twice", `, "minNotice": "1h", "minNotice": "90d"`, domain.CodeInvalidParameter, "minNotice"},
		{"no scope", `!{"timeZone": "UTC"}`, domain.CodeInvalidParameter, "scope"},
		{"scope not a string", `!{"scope": 7}`, domain.CodeInvalidParameter, "scope"},
		{"scope of resourceGroups without a name", `!{"scope": "/subscriptions/0b1f/resourceGroups"}`, domain.CodeInvalidParameter, "scope"},
		{"scope with a trailing slash", `!{"scope": "/subscriptions/0b1f/"}`, domain.CodeInvalidParameter, "scope"},
		{"unknown time zone", `, "timeZone": "Mars/Olympus"`, domain.CodeInvalidParameter, "timeZone"},
		{"the machine's time zone", `, "timeZone": "Local"`, domain.CodeInvalidParameter, "timeZone"},
		{"windows not an array", `, "windows": {}`, domain.CodeInvalidParameter, "windows"},
		{"a window not an object", `, "windows": [` + weekdays + `, 1]`, domain.CodeInvalidParameter, "windows[1]"},
		{"a window null", `, "windows": [null]`, domain.CodeInvalidParameter, "windows[0]"},
		{"unknown field in a window", `, "windows": [{"rrule": "FREQ=DAILY", "start": "22:00", "duration": "6h", "end": "04:00"}]`, domain.CodeInvalidParameter, "windows[0].end"},
		{"too many windows", `, "windows": [` + repeat(weekdays, policy.MaxWindows+1) + `]`, domain.CodeInvalidParameter, "windows"},
		{"rrule missing", `, "windows": [{"start": "22:00", "duration": "6h"}]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"rrule YEARLY", `, "windows": [` + window("FREQ=YEARLY", "22:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"rrule without FREQ", `, "windows": [` + window("BYDAY=SA", "22:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"rrule WEEKLY without BYDAY", `, "windows": [` + window("FREQ=WEEKLY", "22:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"rrule MONTHLY without a day", `, "windows": [` + window("FREQ=MONTHLY", "22:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"rrule ordinal under WEEKLY", `, "windows": [` + window("FREQ=WEEKLY;BYDAY=1SA", "22:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"rrule ordinal 6", `, "windows": [` + window("FREQ=MONTHLY;BYDAY=6SA", "22:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"rrule ordinal 0", `, "windows": [` + window("FREQ=MONTHLY;BYDAY=0SA", "22:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"rrule unknown day", `, "windows": [` + window("FREQ=WEEKLY;BYDAY=XX", "22:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"rrule with DTSTART", `, "windows": [` + window("DTSTART=20260101T000000Z;FREQ=DAILY", "22:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"rrule with an RRULE: prefix", `, "windows": [` + window("RRULE:FREQ=DAILY", "22:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"rrule with COUNT", `, "windows": [` + window("FREQ=DAILY;COUNT=3", "22:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"rrule with BYHOUR", `, "windows": [` + window("FREQ=DAILY;BYHOUR=3", "22:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"rrule INTERVAL 0", `, "windows": [` + window("FREQ=DAILY;INTERVAL=0", "22:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"rrule INTERVAL too large", `, "windows": [` + window("FREQ=DAILY;INTERVAL=100", "22:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"rrule BYMONTHDAY 32", `, "windows": [` + window("FREQ=MONTHLY;BYMONTHDAY=32", "22:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"rrule BYMONTHDAY under WEEKLY", `, "windows": [` + window("FREQ=WEEKLY;BYDAY=SA;BYMONTHDAY=1", "22:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"rrule part twice", `, "windows": [` + window("FREQ=DAILY;FREQ=DAILY", "22:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"rrule too long", `, "windows": [` + window("FREQ=DAILY;BYMONTHDAY="+repeat("1", 200), "22:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].rrule"},
		{"start without leading zero", `, "windows": [` + window("FREQ=DAILY", "9:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].start"},
		{"start 24:00", `, "windows": [` + window("FREQ=DAILY", "24:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].start"},
		{"start with seconds", `, "windows": [` + window("FREQ=DAILY", "22:00:00", "6h") + `]`, domain.CodeInvalidParameter, "windows[0].start"},
		{"start not a string", `, "windows": [{"rrule": "FREQ=DAILY", "start": 22, "duration": "6h"}]`, domain.CodeInvalidParameter, "windows[0].start"},
		{"duration under 1h", `, "windows": [` + window("FREQ=DAILY", "22:00", "59m") + `]`, domain.CodeInvalidParameter, "windows[0].duration"},
		{"duration over 24h", `, "windows": [` + window("FREQ=DAILY", "22:00", "1d1s") + `]`, domain.CodeInvalidParameter, "windows[0].duration"},
		{"duration not a duration", `, "windows": [` + window("FREQ=DAILY", "22:00", "six hours") + `]`, domain.CodeInvalidParameter, "windows[0].duration"},
		{"second window at fault", `, "windows": [` + weekdays + `,` + window("FREQ=DAILY", "22:00", "") + `]`, domain.CodeInvalidParameter, "windows[1].duration"},
		{"too many blackouts", `, "blackouts": [` + repeat(blackout("2027-03-01", "2027-03-02"), policy.MaxBlackouts+1) + `]`, domain.CodeInvalidParameter, "blackouts"},
		{"blackout date not a date", `, "blackouts": [` + blackout("2027-03-01", "2027-03-02") + `,` + blackout("2027-03-01", "2027-03-02") + `,` + blackout("2027-02-30", "2027-03-02") + `]`, domain.CodeInvalidParameter, "blackouts[2]"},
		{"blackout date with a time", `, "blackouts": [` + blackout("2027-03-01T00:00:00Z", "2027-03-02") + `]`, domain.CodeInvalidParameter, "blackouts[0]"},
		{"blackout ending on its start (end exclusive: empty)", `, "blackouts": [` + blackout("2027-03-01", "2027-03-01") + `]`, domain.CodeInvalidParameter, "blackouts[0]"},
		{"blackout ending before it starts", `, "blackouts": [` + blackout("2027-03-02", "2027-03-01") + `]`, domain.CodeInvalidParameter, "blackouts[0]"},
		{"blackout of 91 days", `, "blackouts": [` + blackout("2027-01-01", "2027-04-02") + `]`, domain.CodeInvalidParameter, "blackouts[0]"},
		{"blackout with an unknown field", `, "blackouts": [{"start": "2027-01-01", "end": "2027-01-02", "why": "x"}]`, domain.CodeInvalidParameter, "blackouts[0]"},
		{"blackout reason not text", `, "blackouts": [{"start": "2027-01-01", "end": "2027-01-02", "reason": 5}]`, domain.CodeInvalidParameter, "blackouts[0]"},
		{"blackout reason with control characters", `, "blackouts": [{"start": "2027-01-01", "end": "2027-01-02", "reason": "a\u0007b"}]`, domain.CodeInvalidParameter, "blackouts[0]"},
		{"blackout reason too long", `, "blackouts": [{"start": "2027-01-01", "end": "2027-01-02", "reason": "` + strings.Repeat("r", policy.MaxReasonBytes+1) + `"}]`, domain.CodeInvalidParameter, "blackouts[0]"},
		{"minNotice not a duration", `, "minNotice": "two weeks"`, domain.CodeInvalidParameter, "minNotice"},
		{"minNotice negative", `, "minNotice": "-1h"`, domain.CodeInvalidParameter, "minNotice"},
		{"minNotice over 90 days", `, "minNotice": "13w"`, domain.CodeInvalidParameter, "minNotice"},
		{"allowReschedule not a boolean", `, "allowReschedule": "yes"`, domain.CodeInvalidParameter, "allowReschedule"},
		{"48/32: too little open time", `, "windows": [` + window("FREQ=WEEKLY;BYDAY=SA", "22:00", "4h") + `]`, domain.CodeInvalidParameter, "windows"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"scope": %q%s}`, scope, c.fields)
			if rest, ok := strings.CutPrefix(c.fields, "!"); ok {
				body = rest
			}
			p, rej := policy.Parse([]byte(body), setAt)
			if rej == nil {
				t.Fatalf("Parse accepted %s as %+v", body, p.Document())
			}
			if rej.Code != c.code || rej.Target != c.target || rej.Message == "" {
				t.Errorf("Parse: %v; want %s on %q", rej, c.code, c.target)
			}
		})
	}
}

func TestParse_AcceptsTheFormsAPersonWrites(t *testing.T) {
	for _, fields := range []string{
		``,
		`, "timeZone": "", "windows": null, "blackouts": []`,
		`, "windows": [` + window("freq=weekly;byday=mo,tu,we,th,fr", "22:00", "6h") + `]`,
		`, "windows": [` + window("FREQ=DAILY", "00:00", "1d") + `]`,
		`, "windows": [` + window("FREQ=MONTHLY;BYDAY=+1SA,-1SU,2WE", "23:59", "24h") + `, ` + weekdays + `]`,
		`, "minNotice": "2w", "allowReschedule": false`,
		`, "minNotice": "0"`,
		`, "blackouts": [` + blackout("2028-01-01", "2028-03-31") + `]`, // 90 days, beyond the 48/32 rule's year
		`, "timeZone": "America/New_York", "blackouts": [{"start": "2027-01-01", "end": "2027-01-02", "reason": "line one\nline two"}]`,
	} {
		body := fmt.Sprintf(`{"scope": %q%s}`, scope, fields)
		if _, rej := policy.Parse([]byte(body), setAt); rej != nil {
			t.Errorf("Parse(%s): %v", body, rej)
		}
	}
}
