package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"maintsignals/infra/cli"
)

func TestUseDays_ReadsAndPrintsDays(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	var keep, tick time.Duration
	fs.DurationVar(&keep, "retention", 400*24*time.Hour, "how long")
	fs.DurationVar(&tick, "tick", time.Minute, "how often")
	cli.UseDays(fs)
	cli.UseDays(fs) // twice changes nothing
	if got := fs.Lookup("retention").DefValue; got != "400d" {
		t.Errorf("default printed %q", got)
	}
	if err := fs.Parse([]string{"--retention", "14d", "--tick=90s"}); err != nil {
		t.Fatal(err)
	}
	if keep != 14*24*time.Hour || tick != 90*time.Second {
		t.Errorf("retention %s, tick %s", keep, tick)
	}
	if got := fs.Lookup("retention").Value.String(); got != "14d" {
		t.Errorf("value printed %q, want 14d", got)
	}
	if err := fs.Parse([]string{"--tick", "1x"}); err == nil {
		t.Error("--tick 1x accepted")
	}
	if !strings.Contains(fs.FlagUsages(), "(default 1m)") {
		t.Errorf("usage does not print the default in the short form:\n%s", fs.FlagUsages())
	}
}

func TestTimeVar(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	var since, before time.Time
	cli.TimeVar(fs, &since, "since", "24h", cli.Ago, clock, "from when")
	cli.TimeVar(fs, &before, "before", "", cli.Ahead, clock, "until when")
	if !since.Equal(now.Add(-24*time.Hour)) || !before.IsZero() {
		t.Errorf("defaults: since %v, before %v", since, before)
	}
	for _, tt := range []struct {
		args   []string
		since  time.Time
		before time.Time
	}{
		{[]string{"--since", "7d", "--before", "+2w"}, now.Add(-7 * 24 * time.Hour), now.Add(14 * 24 * time.Hour)},
		{[]string{"--since", "-1h", "--before", "2026-12-14"}, now.Add(-time.Hour), time.Date(2026, 12, 14, 0, 0, 0, 0, time.UTC)},
		{[]string{"--since", "0"}, time.Time{}, time.Date(2026, 12, 14, 0, 0, 0, 0, time.UTC)},
		{[]string{"--since", "2026-11-30T08:00:00Z"}, time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC), time.Date(2026, 12, 14, 0, 0, 0, 0, time.UTC)},
	} {
		if err := fs.Parse(tt.args); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if !since.Equal(tt.since) || !before.Equal(tt.before) {
			t.Errorf("%v: since %v before %v, want %v %v", tt.args, since, before, tt.since, tt.before)
		}
	}
	for _, bad := range [][]string{{"--before", "2w"}, {"--since", "yesterday"}} {
		if err := fs.Parse(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func table() *cli.Tab {
	tb := cli.NewTable(cli.Column{Header: "NAME"}, cli.Column{Header: "STATE"}, cli.Column{Header: "LAST ERROR", Shrink: true}, cli.Column{Header: "RESOURCE ID", Wide: true})
	tb.Row("/s/c1", "rg/c1", "Unplanned", "operator update timed out after 30 minutes waiting for the\nnodes", "/s/c1")
	tb.Row("/s/c2", "rg/c2", "None", "", "/s/c2")
	return tb
}

func TestTable_FitsTheTerminalOnlyOnATerminal(t *testing.T) {
	var b strings.Builder
	if err := table().Write(&b, cli.View{Format: cli.Table}); err != nil {
		t.Fatal(err)
	}
	want := "NAME   STATE      LAST ERROR\n" +
		"rg/c1  Unplanned  operator update timed out after 30 minutes waiting for the nodes\n" +
		"rg/c2  None       -\n"
	if b.String() != want {
		t.Errorf("piped:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	_ = table().Write(&b, cli.View{Format: cli.Table, Width: 40})
	for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if n := len([]rune(l)); n > 40 {
			t.Errorf("line of %d columns at width 40: %q", n, l)
		}
	}
	if !strings.Contains(b.String(), "operator update timed…") {
		t.Errorf("cut cell without an ellipsis:\n%s", b.String())
	}
	b.Reset()
	_ = table().Write(&b, cli.View{Format: cli.Wide, NoHeaders: true})
	if lines := strings.Split(b.String(), "\n"); !strings.HasPrefix(lines[0], "rg/c1") || !strings.HasSuffix(lines[0], "/s/c1") {
		t.Errorf("wide without headers:\n%s", b.String())
	}
	b.Reset()
	_ = table().Write(&b, cli.View{Format: cli.Name})
	if b.String() != "/s/c1\n/s/c2\n" {
		t.Errorf("names %q", b.String())
	}
}

func TestShortNames(t *testing.T) {
	arm := func(sub, rg, name string) string {
		return "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.RedHatOpenShift/openShiftClusters/" + name
	}
	ids := []string{arm("a", "rg-1", "c1"), arm("a", "rg-1", "c2"), arm("a", "rg-2", "c1"), arm("b", "rg-2", "c1"), "c9", "my cluster", strings.ToUpper(arm("a", "rg-1", "c2"))}
	got := cli.ShortNames(ids)
	want := []string{"rg-1/c1", "rg-1/c2", ids[2], ids[3], "c9", "my cluster", "RG-1/C2"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("ShortNames[%d] = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestAge(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for ago, want := range map[time.Duration]string{
		42 * time.Second: "42s", 135*time.Minute + 20*time.Second: "2h15m", 76*time.Hour + 59*time.Minute: "3d4h",
		400 * 24 * time.Hour: "400d", -time.Minute: "0s",
	} {
		if got := cli.Age(now.Add(-ago), now); got != want {
			t.Errorf("Age(%s ago) = %q, want %q", ago, got, want)
		}
	}
	if cli.Age(time.Time{}, now) != "-" {
		t.Error("zero time")
	}
}
