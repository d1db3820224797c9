package domain_test

import (
	"errors"
	"testing"
	"time"

	"maintsignals/shared/domain"
)

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 30, 15, 500, time.FixedZone("CET", 3600))
	for _, tt := range []struct {
		in   string
		want time.Time
	}{
		{"2026-12-14T02:00:00Z", time.Date(2026, 12, 14, 2, 0, 0, 0, time.UTC)},
		{"2026-12-14T03:00:00+01:00", time.Date(2026, 12, 14, 2, 0, 0, 0, time.UTC)},
		{"2026-12-14", time.Date(2026, 12, 14, 0, 0, 0, 0, time.UTC)},
		{" 2026-12-14 ", time.Date(2026, 12, 14, 0, 0, 0, 0, time.UTC)},
		{"+14d", time.Date(2026, 12, 15, 9, 30, 15, 0, time.UTC)},
		{"+1w2h", time.Date(2026, 12, 8, 11, 30, 15, 0, time.UTC)},
		{"+90m", time.Date(2026, 12, 1, 11, 0, 15, 0, time.UTC)},
		{"-1d", time.Date(2026, 11, 30, 9, 30, 15, 0, time.UTC)},
	} {
		got, err := domain.ParseTime(tt.in, now)
		if err != nil || !got.Equal(tt.want) || got.Location() != time.UTC {
			t.Errorf("ParseTime(%q) = %v, %v; want %v UTC", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "tomorrow", "14d", "2026-14-01", "+", "+2x", "2026-12-14 02:00"} {
		if _, err := domain.ParseTime(in, now); !errors.Is(err, domain.ErrInvalidTime) {
			t.Errorf("ParseTime(%q) = %v, want ErrInvalidTime", in, err)
		}
	}
}
