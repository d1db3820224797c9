package policy

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/teambition/rrule-go"
)

// anchor is the DTSTART every rule is evaluated from: Monday 1 January 2001, a local date.
// It is the first day of a week (weeks start on Monday), of a month and of a year, so an
// INTERVAL counts days, weeks or months from a fixed point: "FREQ=WEEKLY;INTERVAL=2" means the
// weeks whose distance from the week of the anchor is even, whoever set the policy and when.
var anchor = time.Date(2001, time.January, 1, 0, 0, 0, 0, time.UTC)

// MaxInterval bounds INTERVAL; a longer one could not keep 48 hours open in 32 days anyway.
const MaxInterval = 99

// The years in which windows are evaluated; outside them no time is inside a window.
const (
	minYear = 1900
	maxYear = 9998
)

var (
	allowedParts = []string{"FREQ", "INTERVAL", "BYDAY", "BYMONTHDAY"}
	bydayToken   = regexp.MustCompile(`^([+-]?[1-5])?(MO|TU|WE|TH|FR|SA|SU)$`)
	clockPattern = regexp.MustCompile(`^([01][0-9]|2[0-3]):([0-5][0-9])$`)
)

// rule is one allowed window, compiled: the dates come from the recurrence, each evaluated on
// the civil calendar (UTC stands for "no zone" there), then placed at hour:minute local time.
type rule struct {
	opt          rrule.ROption
	hour, minute int
	duration     time.Duration
}

// parseRRule reads a rule of the forms the README allows, with a message that says what is
// wrong; rrule-go then reads the values.
func parseRRule(s string) (rrule.ROption, error) {
	if len(s) > MaxRRuleBytes {
		return rrule.ROption{}, fmt.Errorf("is %d bytes, at most %d", len(s), MaxRRuleBytes)
	}
	up := strings.ToUpper(strings.TrimSpace(s))
	if up == "" {
		return rrule.ROption{}, fmt.Errorf("is required, for example FREQ=WEEKLY;BYDAY=SA")
	}
	parts := map[string]string{}
	for _, part := range strings.Split(up, ";") {
		name, value, ok := strings.Cut(part, "=")
		switch {
		case !ok || value == "":
			return rrule.ROption{}, fmt.Errorf("part %q is not NAME=VALUE", part)
		case name == "DTSTART" || strings.HasPrefix(name, "RRULE:") || strings.HasPrefix(name, "DTSTART"):
			return rrule.ROption{}, fmt.Errorf("must be the rule alone, without DTSTART or RRULE: (the window's start gives the time of day)")
		case !contains(allowedParts, name):
			return rrule.ROption{}, fmt.Errorf("%s is not supported: use %s (the window's start and duration give the time of day)", name, strings.Join(allowedParts, ", "))
		case parts[name] != "":
			return rrule.ROption{}, fmt.Errorf("%s is given twice", name)
		}
		parts[name] = value
	}
	if err := checkParts(parts); err != nil {
		return rrule.ROption{}, err
	}
	opt, err := rrule.StrToROption(up)
	if err != nil {
		return rrule.ROption{}, err
	}
	if _, err := rrule.NewRRule(*opt); err != nil {
		return rrule.ROption{}, err
	}
	return *opt, nil
}

// checkParts refuses what rrule-go would accept but RFC 5545 or this product does not.
func checkParts(parts map[string]string) error {
	freq := parts["FREQ"]
	switch freq {
	case "DAILY", "WEEKLY", "MONTHLY":
	case "":
		return fmt.Errorf("FREQ is required")
	default:
		return fmt.Errorf("FREQ %s is not supported: use DAILY, WEEKLY or MONTHLY", freq)
	}
	if v, ok := parts["INTERVAL"]; ok {
		if n, err := strconv.Atoi(v); err != nil || n < 1 || n > MaxInterval {
			return fmt.Errorf("INTERVAL must be a whole number from 1 to %d", MaxInterval)
		}
	}
	if v, ok := parts["BYDAY"]; ok {
		for _, tok := range strings.Split(v, ",") {
			m := bydayToken.FindStringSubmatch(tok)
			switch {
			case m == nil:
				return fmt.Errorf("BYDAY %q: want MO..SU, with an ordinal 1..5 or -1..-5 under MONTHLY (1SA, -1SU)", tok)
			case m[1] != "" && freq != "MONTHLY":
				return fmt.Errorf("BYDAY %q: an ordinal needs FREQ=MONTHLY", tok)
			}
		}
	}
	if v, ok := parts["BYMONTHDAY"]; ok {
		if freq == "WEEKLY" {
			return fmt.Errorf("BYMONTHDAY cannot be used with FREQ=WEEKLY")
		}
		for _, tok := range strings.Split(v, ",") {
			if n, err := strconv.Atoi(tok); err != nil || n == 0 || n < -31 || n > 31 {
				return fmt.Errorf("BYMONTHDAY %q: want 1..31 or -31..-1", tok)
			}
		}
	}
	switch {
	case freq == "WEEKLY" && parts["BYDAY"] == "":
		return fmt.Errorf("FREQ=WEEKLY needs BYDAY (there is no DTSTART to take the day from)")
	case freq == "MONTHLY" && parts["BYDAY"] == "" && parts["BYMONTHDAY"] == "":
		return fmt.Errorf("FREQ=MONTHLY needs BYDAY or BYMONTHDAY (there is no DTSTART to take the day from)")
	}
	return nil
}

// parseClock reads a local start time HH:MM.
func parseClock(s string) (hour, minute int, ok bool) {
	m := clockPattern.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, false
	}
	hour, _ = strconv.Atoi(m[1])
	minute, _ = strconv.Atoi(m[2])
	return hour, minute, true
}

// dates appends to dst the civil dates of the rule's occurrences in the month of from (a
// first of the month, UTC), from the anchor's phase.
func (r rule) dates(dst []time.Time, from time.Time) []time.Time {
	opt := r.opt
	opt.Dtstart = phaseStart(opt.Freq, max(opt.Interval, 1), from)
	opt.Until = from.AddDate(0, 1, 0).Add(-time.Second)
	rr, err := rrule.NewRRule(opt)
	if err != nil {
		return dst // parseRRule built the same options without error
	}
	next := rr.Iterator()
	for t, ok := next(); ok; t, ok = next() {
		if !t.Before(from) {
			dst = append(dst, t)
		}
	}
	return dst
}

// phaseStart is the latest start of a period (day, week from Monday, month) at or before from
// whose distance from the anchor's is a multiple of interval: iterating from there gives the
// occurrences the rule would give iterating from the anchor itself, without the years between.
func phaseStart(freq rrule.Frequency, interval int, from time.Time) time.Time {
	switch freq {
	case rrule.WEEKLY:
		monday := from.AddDate(0, 0, -((int(from.Weekday()) + 6) % 7))
		weeks := civilDays(monday) / 7
		return monday.AddDate(0, 0, -7*floorMod(weeks, interval))
	case rrule.MONTHLY:
		first := time.Date(from.Year(), from.Month(), 1, 0, 0, 0, 0, time.UTC)
		months := (from.Year()-anchor.Year())*12 + int(from.Month()-anchor.Month())
		return first.AddDate(0, -floorMod(months, interval), 0)
	default:
		days := civilDays(from)
		return from.AddDate(0, 0, -floorMod(days, interval))
	}
}

// civilDays counts the days from the anchor to the civil date d (negative before it).
func civilDays(d time.Time) int { return int((d.Unix() - anchor.Unix()) / 86400) }

func floorMod(a, n int) int { return ((a % n) + n) % n }

// localAt is the instant of a local wall-clock time on a civil date. A time that a
// daylight-saving change skips is read with the offset before the gap (02:30 becomes 03:30
// summer time); a time that occurs twice is the first of the two (summer time), as RFC 5545
// says. Go's time.Date returns the second, so the first is looked for.
func localAt(date time.Time, hour, minute int, loc *time.Location) time.Time {
	y, m, d := date.Date()
	t := time.Date(y, m, d, hour, minute, 0, 0, loc)
	_, off := t.Zone()
	_, before := t.Add(-24 * time.Hour).Zone()
	if before > off {
		earlier := t.Add(-time.Duration(before-off) * time.Second)
		if ey, em, ed := earlier.Date(); ey == y && em == m && ed == d && earlier.Hour() == hour && earlier.Minute() == minute {
			return earlier
		}
	}
	return t
}

// expandMonth lists the occurrences of every rule whose local date is in month k (see
// monthOf), by start.
func expandMonth(rules []rule, loc *time.Location, k int) []span {
	from := time.Date(k/12, time.Month(k%12+1), 1, 0, 0, 0, 0, time.UTC)
	out := make([]span, 0, 31*len(rules))
	dates := make([]time.Time, 0, 31)
	for _, r := range rules {
		dates = r.dates(dates[:0], from)
		for _, d := range dates {
			start := localAt(d, r.hour, r.minute, loc)
			out = append(out, span{start: start, end: start.Add(r.duration)})
		}
	}
	if len(rules) > 1 {
		slices.SortFunc(out, func(a, b span) int {
			if c := a.start.Compare(b.start); c != 0 {
				return c
			}
			return b.end.Compare(a.end)
		})
	}
	return out
}
