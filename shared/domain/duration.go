package domain

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Day and Week are the units that ParseDuration adds to Go's: 24 and 168 hours of elapsed
// time (not calendar days: a day across a daylight-saving change is still 24 hours).
const (
	Day  = 24 * time.Hour
	Week = 7 * Day
)

// ErrInvalidDuration is wrapped by every ParseDuration failure.
var ErrInvalidDuration = errors.New("invalid duration")

// ParseDuration reads a duration as time.ParseDuration does ("90m", "1h30m", "-2h"), and also
// with the units d (24h) and w (168h), alone or mixed with the others: "14d", "2w", "1d12h",
// "1.5d". Specs, policies and flags share it, so that every place accepts the same forms.
func ParseDuration(s string) (time.Duration, error) {
	orig := s
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "0" {
		return 0, nil
	}
	if s == "" {
		return 0, fmt.Errorf("%w %q", ErrInvalidDuration, orig)
	}
	var total time.Duration
	for s != "" {
		num, unit, rest, ok := durationTerm(s)
		if !ok {
			return 0, fmt.Errorf("%w %q: want a number and a unit (ns, us, ms, s, m, h, d, w)", ErrInvalidDuration, orig)
		}
		d, err := termValue(num, unit)
		if err == nil && total > math.MaxInt64-d {
			err = errors.New("too large")
		}
		if err != nil {
			return 0, fmt.Errorf("%w %q: %v", ErrInvalidDuration, orig, err)
		}
		total += d
		s = rest
	}
	if neg {
		total = -total
	}
	return total, nil
}

// durationTerm splits s into its first number, unit and the rest.
func durationTerm(s string) (num, unit, rest string, ok bool) {
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i <= 0 {
		return "", "", "", false
	}
	num, s = s[:i], s[i:]
	j := strings.IndexFunc(s, func(r rune) bool { return '0' <= r && r <= '9' || r == '.' })
	if j < 0 {
		j = len(s)
	}
	return num, s[:j], s[j:], j > 0 && num != "."
}

// termValue is one term: d and w as that many hours times 24 or 168, the others as
// time.ParseDuration reads them (it knows their spellings and their precision).
func termValue(num, unit string) (time.Duration, error) {
	mult := time.Duration(1)
	switch unit {
	case "d":
		unit, mult = "h", 24
	case "w":
		unit, mult = "h", 168
	}
	d, err := time.ParseDuration(num + unit)
	if err != nil {
		return 0, fmt.Errorf("%q: unknown unit or bad number", num+unit)
	}
	if d > math.MaxInt64/mult {
		return 0, errors.New("too large")
	}
	return d * mult, nil
}

// FormatDuration writes d in the shortest form ParseDuration reads back to d, with the units
// w, d, h, m and s ("2w", "1d12h", "15m", "1h30m", "1.5s"): a canonical spelling, so that
// "14d" and "336h" are written alike. Fractions of a second are written as Go does.
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	if d < 0 {
		return "-" + FormatDuration(-d)
	}
	var b strings.Builder
	for _, u := range []struct {
		unit string
		size time.Duration
	}{{"w", Week}, {"d", Day}, {"h", time.Hour}, {"m", time.Minute}} {
		if n := d / u.size; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.unit)
			d -= n * u.size
		}
	}
	if d > 0 {
		b.WriteString(d.String()) // seconds and below: "30s", "1.5s", "250ms"
	}
	return b.String()
}

// FormatDays writes d for a person, in whole days where it has any and no weeks ("400d",
// "14d", "1d12h", "6h", "1m30s"): what flags' defaults, tables and notices' leads read as.
func FormatDays(d time.Duration) string {
	if d < 0 {
		return "-" + FormatDays(-d)
	}
	days, rest := d/Day, d%Day
	switch {
	case days == 0:
		return FormatDuration(rest)
	case rest == 0:
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd%s", days, FormatDuration(rest))
}
