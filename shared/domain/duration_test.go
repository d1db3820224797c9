package domain_test

import (
	"errors"
	"testing"
	"time"

	"maintsignals/shared/domain"
)

func TestParseDuration_GoFormsAndDaysAndWeeks(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"90m", 90 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"-2h", -2 * time.Hour},
		{"+3s", 3 * time.Second},
		{"1.5h", 90 * time.Minute},
		{"250ms", 250 * time.Millisecond},
		{"1d", 24 * time.Hour},
		{"14d", 336 * time.Hour},
		{"2w", 336 * time.Hour},
		{"1w2d3h", (168 + 48 + 3) * time.Hour},
		{"1d12h", 36 * time.Hour},
		{"1.5d", 36 * time.Hour},
		{"0.5w", 84 * time.Hour},
		{"-1d", -24 * time.Hour},
		{"3h1d", 27 * time.Hour},
	}
	for _, c := range cases {
		got, err := domain.ParseDuration(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestParseDuration_RefusesWhatIsNotADuration(t *testing.T) {
	for _, in := range []string{"", "-", "1", "d", "1x", "1 d", "1dd", "h1", "1..5d", ".d", "1d-2h", "1e3h", "100000000w", "9223372036854775807ns1ns"} {
		if d, err := domain.ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, d)
		} else if !errors.Is(err, domain.ErrInvalidDuration) {
			t.Errorf("ParseDuration(%q) error %v does not wrap ErrInvalidDuration", in, err)
		}
	}
}

func TestFormatDuration_ShortestFormThatReadsBack(t *testing.T) {
	cases := []struct {
		in   time.Duration
		want string
	}{
		{0, "0"},
		{336 * time.Hour, "2w"},
		{15 * 24 * time.Hour, "2w1d"},
		{36 * time.Hour, "1d12h"},
		{4 * time.Hour, "4h"},
		{90 * time.Minute, "1h30m"},
		{15 * time.Minute, "15m"},
		{30 * time.Second, "30s"},
		{time.Minute + 1500*time.Millisecond, "1m1.5s"},
		{250 * time.Millisecond, "250ms"},
		{-25 * time.Hour, "-1d1h"},
	}
	for _, c := range cases {
		got := domain.FormatDuration(c.in)
		if got != c.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", c.in, got, c.want)
		}
		if back, err := domain.ParseDuration(got); err != nil || back != c.in {
			t.Errorf("ParseDuration(FormatDuration(%v) = %q) = %v, %v", c.in, got, back, err)
		}
	}
}

func TestFormatDays(t *testing.T) {
	for d, want := range map[time.Duration]string{
		400 * 24 * time.Hour: "400d", 14 * 24 * time.Hour: "14d", 36 * time.Hour: "1d12h",
		6 * time.Hour: "6h", 90 * time.Second: "1m30s", 0: "0", -2 * time.Hour: "-2h",
	} {
		if got := domain.FormatDays(d); got != want {
			t.Errorf("FormatDays(%s) = %q, want %q", d, got, want)
		}
		if back, err := domain.ParseDuration(domain.FormatDays(d)); err != nil || back != d {
			t.Errorf("ParseDuration(FormatDays(%s)) = %s, %v", d, back, err)
		}
	}
}
