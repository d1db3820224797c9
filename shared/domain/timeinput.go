package domain

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrInvalidTime is wrapped by every ParseTime failure.
var ErrInvalidTime = errors.New("invalid time")

// ParseTime reads a point in time as people write one: an RFC 3339 time
// (2026-12-14T02:00:00Z), a date alone (2026-12-14, midnight UTC), or a signed offset from now
// in the units of ParseDuration (+14d, -2h). An offset is truncated to the second, so that what
// is stored reads as it was typed.
func ParseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "+") || strings.HasPrefix(s, "-") {
		d, err := ParseDuration(s)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w %q: %w", ErrInvalidTime, s, err)
		}
		return now.Add(d).UTC().Truncate(time.Second), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%w %q: want RFC 3339 (2026-12-14T02:00:00Z), a date (2026-12-14, midnight UTC) or an offset from now (+2h, +14d, -1d)", ErrInvalidTime, s)
}
