package policy

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"maintsignals/shared/domain"
)

// Bounds of a window's duration and of a policy's minimum notice.
const (
	MinWindowDuration = time.Hour
	MaxWindowDuration = 24 * time.Hour
	// MaxMinNotice bounds minNotice: a longer notice would let a policy hold maintenance off
	// longer than the 48/32 rule means to allow.
	MaxMinNotice = 90 * domain.Day
)

// Policy is a compiled policy: its document, read and checked, ready to answer queries. It is
// safe for concurrent use; occurrences are computed once per local month and kept, so a
// caller should compile a policy once per revision and reuse it.
type Policy struct {
	doc       Document
	scope     Scope
	loc       *time.Location
	rules     []rule
	maxDur    time.Duration // the longest window; 0 when there are none
	blackouts []blackout    // as written, for messages
	closed    []span        // the blackouts merged, by start
	minNotice time.Duration

	mu     sync.Mutex // serialises writers of months
	months atomic.Pointer[map[int][]span]
}

// span is [start, end).
type span struct{ start, end time.Time }

type blackout struct {
	span
	index  int
	doc    Blackout
	window string // "2026-12-20 to 2027-01-04"
}

// Parse reads a policy being set at now (the stored time of its policy command): Decode,
// Compile, then the 48/32 rule over the 365 days from now (CheckOpen).
func Parse(body []byte, now time.Time) (*Policy, *domain.Rejection) {
	doc, rej := Decode(body)
	if rej != nil {
		return nil, rej
	}
	p, rej := doc.Compile()
	if rej != nil {
		return nil, rej
	}
	if rej := p.CheckOpen(now); rej != nil {
		return nil, rej
	}
	return p, nil
}

// ParseStored reads a policy from the bucket: it passed Parse when it was set, and the 48/32
// rule, which depends on that time, is not judged again.
func ParseStored(body []byte) (*Policy, error) {
	doc, rej := Decode(body)
	if rej != nil {
		return nil, fmt.Errorf("stored policy: %w", rej)
	}
	p, rej := doc.Compile()
	if rej != nil {
		return nil, fmt.Errorf("stored policy: %w", rej)
	}
	return p, nil
}

// Compile checks every field of the document and compiles it; a rejection names the field
// (scope, timeZone, windows, windows[i].rrule, .start, .duration, blackouts, blackouts[i],
// minNotice).
func (d Document) Compile() (*Policy, *domain.Rejection) {
	scope, rej := ParseScope(d.Scope)
	if rej != nil {
		return nil, rej
	}
	p := &Policy{doc: d, scope: scope}
	if p.loc, rej = loadZone(d.TimeZone); rej != nil {
		return nil, rej
	}
	if rej := p.compileWindows(d.Windows); rej != nil {
		return nil, rej
	}
	if rej := p.compileBlackouts(d.Blackouts); rej != nil {
		return nil, rej
	}
	if d.MinNotice != "" {
		n, err := domain.ParseDuration(d.MinNotice)
		switch {
		case err != nil:
			return nil, domain.InvalidParameter("minNotice", "%v", err)
		case n < 0 || n > MaxMinNotice:
			return nil, domain.InvalidParameter("minNotice", "must be from 0 to %s (%s)", MaxMinNotice, "90d")
		}
		p.minNotice = n
	}
	return p, nil
}

var zones sync.Map // name → *time.Location: loading a zone reads the database each time

// loadZone reads an IANA time-zone name; "" is UTC. "Local" is refused: it would differ
// from one machine to another.
func loadZone(name string) (*time.Location, *domain.Rejection) {
	if name == "" {
		return time.UTC, nil
	}
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	if name == "Local" || len(name) > 64 || strings.ContainsAny(name, `\ `) {
		return nil, domain.InvalidParameter("timeZone", "must be an IANA time-zone name such as Europe/Berlin or UTC")
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, domain.InvalidParameter("timeZone", "unknown time zone %q: want an IANA name such as Europe/Berlin", name)
	}
	zones.Store(name, loc)
	return loc, nil
}

func (p *Policy) compileWindows(ws []Window) *domain.Rejection {
	if len(ws) > MaxWindows {
		return domain.InvalidParameter("windows", "has %d windows, at most %d", len(ws), MaxWindows)
	}
	for i, w := range ws {
		at := fmt.Sprintf("windows[%d].", i)
		opt, err := parseRRule(w.RRule)
		if err != nil {
			return domain.InvalidParameter(at+"rrule", "%v", err)
		}
		hour, minute, ok := parseClock(w.Start)
		if !ok {
			return domain.InvalidParameter(at+"start", "must be a local time HH:MM (00:00 to 23:59), got %q", w.Start)
		}
		dur, err := domain.ParseDuration(w.Duration)
		if err != nil {
			return domain.InvalidParameter(at+"duration", "%v", err)
		}
		if dur < MinWindowDuration || dur > MaxWindowDuration {
			return domain.InvalidParameter(at+"duration", "must be from 1h to 24h, got %s", dur)
		}
		p.rules = append(p.rules, rule{opt: opt, hour: hour, minute: minute, duration: dur})
		p.maxDur = max(p.maxDur, dur)
	}
	return nil
}

func (p *Policy) compileBlackouts(bs []Blackout) *domain.Rejection {
	if len(bs) > MaxBlackouts {
		return domain.InvalidParameter("blackouts", "has %d blackouts, at most %d", len(bs), MaxBlackouts)
	}
	for i, b := range bs {
		at := fmt.Sprintf("blackouts[%d]", i)
		start, err1 := time.Parse(time.DateOnly, b.Start)
		end, err2 := time.Parse(time.DateOnly, b.End)
		days := civilDays(end) - civilDays(start)
		switch {
		case err1 != nil || err2 != nil:
			return domain.InvalidParameter(at, "start and end must be local dates YYYY-MM-DD, got %q and %q", b.Start, b.End)
		case days < 1:
			return domain.InvalidParameter(at, "end (%s, exclusive) must be after start (%s)", b.End, b.Start)
		case days > MaxBlackoutDays:
			return domain.InvalidParameter(at, "lasts %d days, at most %d", days, MaxBlackoutDays)
		case len(b.Reason) > MaxReasonBytes:
			return domain.InvalidParameter(at, "reason is %d bytes, at most %d", len(b.Reason), MaxReasonBytes)
		case strings.ContainsFunc(b.Reason, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' && r != '\r' }):
			return domain.InvalidParameter(at, "reason contains control characters")
		}
		s := span{localAt(start, 0, 0, p.loc), localAt(end, 0, 0, p.loc)}
		p.blackouts = append(p.blackouts, blackout{span: s, index: i, doc: b, window: b.Start + " to " + b.End})
	}
	p.closed = mergeSpans(p.blackouts)
	return nil
}

// mergeSpans is the union of the blackouts, as disjoint spans by start.
func mergeSpans(bs []blackout) []span {
	out := make([]span, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.span)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	merged := out[:0]
	for _, s := range out {
		if n := len(merged); n > 0 && !s.start.After(merged[n-1].end) {
			merged[n-1].end = later(merged[n-1].end, s.end)
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Document returns the policy as written.
func (p *Policy) Document() Document { return p.doc }

// Scope returns the policy's scope.
func (p *Policy) Scope() Scope { return p.scope }

// Location returns the time zone the windows and blackouts are local to.
func (p *Policy) Location() *time.Location { return p.loc }

// MinNotice returns the customer's minimum notice (0 when none).
func (p *Policy) MinNotice() time.Duration { return p.minNotice }

// AllowReschedule reports whether the customer may move an announced window.
func (p *Policy) AllowReschedule() bool { return p.doc.AllowReschedule }

// HasWindows reports whether the policy names allowed windows (without, any time is allowed
// outside the blackouts).
func (p *Policy) HasWindows() bool { return len(p.rules) > 0 }
