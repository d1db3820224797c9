package cli

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"maintsignals/shared/domain"
)

// durationValue is a duration flag that reads days and weeks (domain.ParseDuration: 14d, 2w,
// 1d12h) and prints itself in days (domain.FormatDays: 400d rather than 9600h0m0s). It wraps the
// flag's own value, which keeps the variable it was bound to.
type durationValue struct{ inner pflag.Value }

func (v durationValue) Set(s string) error {
	d, err := domain.ParseDuration(s)
	if err != nil {
		return err
	}
	return v.inner.Set(d.String())
}

func (v durationValue) String() string {
	d, err := time.ParseDuration(v.inner.String())
	if err != nil {
		return v.inner.String()
	}
	return domain.FormatDays(d)
}

func (durationValue) Type() string { return "duration" }

// UseDays makes every duration flag of fs read and print days and weeks, its default
// included. Flags defined later are not changed: call it once a command's flags are all
// defined (maintctl calls it on every command of its tree).
func UseDays(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if _, done := f.Value.(durationValue); done || f.Value.Type() != "duration" {
			return
		}
		v := durationValue{f.Value}
		if d, err := time.ParseDuration(f.DefValue); err == nil {
			f.DefValue = domain.FormatDays(d)
		}
		f.Value = v
	})
}

// TimeKind says how a time flag reads a bare duration.
type TimeKind int

const (
	// Ahead: a point from now on, such as a window's start: "+2h" is two hours from now and a
	// bare duration is refused (it could mean either way).
	Ahead TimeKind = iota
	// Ago: a point in the past, such as --since: a bare duration ("24h", "7d") is that long
	// ago, as "-24h" is, and "0" is no bound at all (the zero time).
	Ago
)

// timeValue is a time flag: RFC 3339, a date alone (midnight UTC), or an offset from now
// (domain.ParseTime), read when it is set.
type timeValue struct {
	p    *time.Time
	raw  string
	kind TimeKind
	now  func() time.Time
}

// TimeVar defines a time flag on fs. def is the default as a person would type it ("" for
// none: the zero time); now is the clock (nil: time.Now).
func TimeVar(fs *pflag.FlagSet, p *time.Time, name, def string, kind TimeKind, now func() time.Time, usage string) {
	if now == nil {
		now = time.Now
	}
	v := &timeValue{p: p, kind: kind, now: now}
	if def != "" {
		if err := v.Set(def); err != nil {
			panic(fmt.Sprintf("flag --%s: default %q: %v", name, def, err))
		}
	}
	fs.Var(v, name, usage)
}

func (v *timeValue) Set(s string) error {
	in := s
	if d, err := domain.ParseDuration(s); v.kind == Ago && err == nil {
		switch {
		case d == 0:
			*v.p, v.raw = time.Time{}, s
			return nil
		case s[0] != '-' && s[0] != '+':
			in = "-" + s
		}
	}
	t, err := domain.ParseTime(in, v.now())
	if err != nil {
		return err
	}
	*v.p, v.raw = t, s
	return nil
}

func (v *timeValue) String() string { return v.raw }
func (*timeValue) Type() string     { return "time" }

// Age writes how long ago t was for a table, in its two largest units ("3d4h", "2h15m",
// "42s"); "-" for the zero time.
func Age(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := max(now.Sub(t), 0).Truncate(time.Second)
	for _, u := range []time.Duration{domain.Day, time.Hour, time.Minute} {
		if d >= u {
			next := map[time.Duration]time.Duration{domain.Day: time.Hour, time.Hour: time.Minute, time.Minute: time.Second}[u]
			return domain.FormatDays(d.Truncate(next))
		}
	}
	if d == 0 {
		return "0s"
	}
	return domain.FormatDays(d)
}
