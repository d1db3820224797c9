package web

import (
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"

	"maintsignals/shared/campaign"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
)

// funcs are the templates' helpers.
func (v *View) funcs() template.FuncMap {
	return template.FuncMap{
		"when":           when,
		"iso":            func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"rel":            func(t time.Time) string { return relative(t, v.cfg.Now()) },
		"stateClass":     func(s domain.State) string { return "s-" + s.MetricValue() },
		"states":         func() []domain.State { return domain.States },
		"entityURL":      func(key string) string { return "/entities/" + key },
		"fleetURL":       fleetURL,
		"short":          shortName,
		"bar":            func(n, most int) int { return scale(n, most, 60) },
		"pct":            func(n, total int) int { return scale(n, total, 100) },
		"day":            func(date string) string { return dayLabel(date) },
		"phases":         func() []campaign.Phase { return campaign.Phases },
		"of":             func(c campaign.Counts, p campaign.Phase) int { return c.Of(p) },
		"lead":           client.NoticeLead,
		"burndown":       burndownPoints,
		"thousands":      thousands,
		"minus":          func(a, b int) int { return a - b },
		"filterState":    func(s domain.State) Filter { return Filter{State: s} },
		"hours":          hours,
		"hhmm":           func(t time.Time) string { return t.UTC().Format("15:04") },
		"deref":          func(b *bool) bool { return b != nil && *b },
		"reverseEvents":  reversed[domain.Event],
		"reverseNotices": reversed[domain.Notice],
	}
}

// when is a time for people: UTC to the minute, "—" for none.
func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// relative says how far t is from now ("in 3 days", "5 minutes ago").
func relative(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := t.Sub(now)
	suffix, prefix := "", "in "
	if d < 0 {
		d, suffix, prefix = -d, " ago", ""
	}
	var s string
	switch {
	case d < time.Minute:
		return "now"
	case d < time.Hour:
		s = plural(int(d/time.Minute), "minute")
	case d < 48*time.Hour:
		s = plural(int(d/time.Hour), "hour")
	default:
		s = plural(int(d/(24*time.Hour)), "day")
	}
	return prefix + s + suffix
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}

// thousands writes n with thin separators: 1 000 000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteRune('\u202f')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// scale is n of most as a share of full, at least 1 when n is not 0.
func scale(n, most, full int) int {
	if n <= 0 || most <= 0 {
		return 0
	}
	return max(1, n*full/most)
}

// shortName is the last segment of a resource ID (a cluster's name).
func shortName(id string) string {
	if i := strings.LastIndexByte(strings.TrimSuffix(id, "/"), '/'); i >= 0 {
		return id[i+1:]
	}
	return id
}

func dayLabel(date string) string {
	t, err := time.Parse(time.DateOnly, date)
	if err != nil {
		return date
	}
	return t.Format("Mon 2 Jan")
}

// fleetURL is the fleet page with filter f, then the pairs of kv (after, a key; …).
func fleetURL(f Filter, kv ...string) string {
	q := url.Values{}
	if f.State != "" {
		q.Set("state", string(f.State))
	}
	if f.Prefix != "" {
		q.Set("prefix", f.Prefix)
	}
	if f.Limit != 0 && f.Limit != DefaultPageSize {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	if len(q) == 0 {
		return "/"
	}
	return "/?" + q.Encode()
}

// burndownPoints draws the remaining entities over time as the points of an SVG polyline in
// a w×h box, in steps: a count holds until the next.
func burndownPoints(ps []BurndownPoint, total, w, h int) string {
	if len(ps) == 0 || total <= 0 {
		return ""
	}
	t0, span := ps[0].At, ps[len(ps)-1].At.Sub(ps[0].At)
	x := func(i int) float64 {
		if span <= 0 {
			return float64(w) * float64(i) / float64(max(len(ps)-1, 1))
		}
		return float64(ps[i].At.Sub(t0)) / float64(span) * float64(w)
	}
	y := func(i int) float64 { return float64(h) - float64(ps[i].Remaining)/float64(total)*float64(h) }
	var b strings.Builder
	for i := range ps {
		if i > 0 {
			fmt.Fprintf(&b, " %.1f,%.1f", x(i), y(i-1))
		}
		fmt.Fprintf(&b, " %.1f,%.1f", x(i), y(i))
	}
	return strings.TrimSpace(b.String())
}

// hours is a window's times of day, UTC ("02:00–06:00", with the end's date when it is
// another day).
func hours(w *domain.Window) string {
	if w == nil {
		return ""
	}
	s, e := w.Start.UTC(), w.End.UTC()
	end := e.Format("15:04")
	if e.Truncate(24*time.Hour) != s.Truncate(24*time.Hour) {
		end = e.Format("Jan 2 15:04")
	}
	return s.Format("15:04") + "–" + end
}

func reversed[T any](in []T) []T {
	out := make([]T, len(in))
	for i, v := range in {
		out[len(in)-1-i] = v
	}
	return out
}
