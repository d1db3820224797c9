package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"maintsignals/functions/campaign"
	"maintsignals/test/testenv"
)

// watchScenario runs `campaign status --watch t1` with its stderr on stderr while a campaign
// of 12 entities, all announced, has its updates started one after the other, a third of them
// failing; it returns the watch's stdout once the watch ended by itself.
func watchScenario(t *testing.T, stderr io.Writer) string {
	t.Helper()
	s := startStack(t, stackOpts{})
	testenv.RunCampaigns(t, s.JS, campaign.Config{}, 200*time.Millisecond)
	c := newCLI(t, s)
	list, ids := writeList(t, 12)
	earliest := time.Now().UTC().Truncate(time.Hour).Add(4 * time.Hour).Format(time.RFC3339)
	c.ok("campaign", "create", "t1", "--list", list, "--earliest", earliest, "--deadline", "+100h",
		"--across", "4h", "--slot", "15m", "--max-per-slot", "5", "--max-per-subscription", "2", "--announce-lead", "336h")
	testenv.Eventually(t, 30*time.Second, "every entity announced", func() bool {
		return strings.Count(c.ok("campaign", "entities", "t1", "--phase", "announced"), "announced") == len(ids)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout testenv.SyncBuffer
	watched := make(chan error, 1)
	go func() {
		watched <- run(ctx, []string{"campaign", "status", "t1", "--watch"}, c.getenv, &stdout, stderr)
	}()
	time.Sleep(500 * time.Millisecond) // the first frame: nothing done
	for i, id := range ids {
		c.ok("start", id)
		if i%3 == 0 {
			c.ok("failed", "--error", "drain timed out", id)
		} else {
			c.ok("succeeded", id)
		}
		time.Sleep(150 * time.Millisecond) // a pass between some of them: the bar moves
	}
	select {
	case err := <-watched:
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the watch did not end when the campaign completed")
	}
	return stdout.String()
}

// Not on a terminal, the watch prints one line per change, never the same line twice in a
// row however often the campaign is written, the last one the campaign completed, then the
// final status.
func TestCampaignCLI_WatchIntoAPipe(t *testing.T) {
	var stderr testenv.SyncBuffer
	out := watchScenario(t, &stderr)
	lines := strings.Split(strings.TrimSpace(strings.SplitN(out, "\n\n", 2)[0]), "\n")
	prev := ""
	for _, l := range lines {
		_, text, _ := strings.Cut(l, " ") // after the time
		if text == prev {
			t.Errorf("the same line twice in a row: %q", text)
		}
		prev = text
	}
	if len(lines) < 4 || !strings.HasPrefix(lines[0], time.Now().UTC().Format("2006-01-02T")) {
		t.Errorf("%d lines, want one per change with its time:\n%s", len(lines), out)
	}
	if prev != "t1 completed: 8/12 done, 12 finished; succeeded=8 failed=4" {
		t.Errorf("last line %q", prev)
	}
	mustContain(t, "the final status", out, "t1: completed")
	if stderr.String() != "" {
		t.Errorf("a bar on stderr without a terminal: %q", stderr.String())
	}
}

// terminal is a pseudo-terminal of cols columns and what was drawn on it.
type terminal struct {
	tty  *os.File
	done chan []byte
}

func openTerminal(t *testing.T, cols uint16) *terminal {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { ptmx.Close(); tty.Close() })
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: cols}); err != nil {
		t.Fatal(err)
	}
	term := &terminal{tty: tty, done: make(chan []byte, 1)}
	go func() {
		var b bytes.Buffer
		_, err := io.Copy(&b, ptmx)
		if err != nil && !errors.Is(err, syscall.EIO) && !errors.Is(err, os.ErrClosed) {
			t.Errorf("reading the terminal: %v", err)
		}
		term.done <- b.Bytes()
	}()
	return term
}

// shown closes the terminal's side of the command and returns everything drawn on it.
func (term *terminal) shown() string {
	term.tty.Close() // the reader sees EIO once it has read everything
	return string(<-term.done)
}

// On a terminal, `campaign status --watch` draws one progress bar on stderr, redrawn in place
// as the entities finish (the count of done moves from 0 up, the status and the phases not
// done beside it from the first frame on), and stops by itself when the campaign completes,
// printing the final status on stdout. A third of the updates fail: the last frame says 8 of
// 12 done, not 100 %.
func TestCampaignCLI_WatchOnATerminal(t *testing.T) {
	term := openTerminal(t, 100)
	stdout := watchScenario(t, term.tty)
	drawn := term.shown()

	// The bar is redrawn in place (carriage returns, no new line per frame) with the count of
	// entities done, which starts at 0 and ends at the 8 that succeeded, through values between.
	frames := strings.Split(strings.ReplaceAll(drawn, "\r\n", "\n"), "\r")
	counts := map[string]bool{}
	re := regexp.MustCompile(`\((\d+)/12\)`)
	last := ""
	for _, f := range frames {
		if m := re.FindStringSubmatch(f); m != nil {
			counts[m[1]] = true
			last = f
			if !strings.Contains(f, "t1 ") {
				t.Errorf("a frame without the campaign's status: %q", f)
			}
		}
	}
	if !counts["0"] || !counts["8"] || len(counts) < 4 || counts["12"] {
		t.Errorf("the bar's counts %v, want 0 up to 8 through values between, never 12:\n%q", counts, drawn)
	}
	if !strings.Contains(last, "66%") || !strings.Contains(last, "(8/12) t1 completed: failed=4") {
		t.Errorf("the last frame %q, want 66%% (8/12) and the campaign completed with its 4 failures", last)
	}
	mustContain(t, "the bar", drawn, "t1 active: announced=12")
	if n := strings.Count(strings.ReplaceAll(drawn, "\r\n", "\n"), "\n"); n > 1 {
		t.Errorf("the bar took %d lines; it is redrawn on one:\n%q", n, drawn)
	}
	if strings.Contains(drawn, "generation") {
		t.Errorf("the status went to the terminal's stderr:\n%q", drawn)
	}
	mustContain(t, "the final status", stdout, "t1: completed", "12: 8 done (66%), 12 finished", "failed       4")
}
