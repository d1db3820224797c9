package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// TestNotices_FunctionListAndWatch runs `maintctl function notices` on a 1 s tick with a
// ladder of seconds, announces a window a few seconds ahead, and follows its notices with
// `maintctl watch` and `maintctl notices` (table and JSON).
func TestNotices_FunctionListAndWatch(t *testing.T) {
	_, c, stop := startNotices(t, "10s")

	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	var wOut, wErr testenv.SyncBuffer
	wDone := make(chan error, 1)
	go func() { wDone <- run(wctx, []string{"watch", "-o", "json", testID}, c.getenv, &wOut, &wErr) }()
	testenv.Eventually(t, 10*time.Second, "watch to start", func() bool { return strings.Contains(wErr.String(), "watching outcome events and notices") })

	c.ok("pending", "--reason", "PUCM", "--window-start", "+3s", "--window-end", "+5s", testID)
	testenv.Eventually(t, 20*time.Second, "three notices", func() bool {
		return len(decodeJSON[[]domain.Notice](t, c.ok("notices", "-o", "json", testID))) >= 3
	})
	ns := decodeJSON[[]domain.Notice](t, c.ok("notices", "-o", "json", testID))
	var kinds []string
	for _, n := range ns {
		kinds = append(kinds, string(n.Kind))
	}
	if got := strings.Join(kinds, " "); got != "reminder due overdue" {
		t.Fatalf("notices %s, want reminder due overdue", got)
	}
	if ns[0].Lead != 10 || ns[0].ResourceID != testID || ns[0].Window == nil || ns[0].State != domain.StatePending {
		t.Errorf("reminder %+v", ns[0])
	}
	mustContain(t, "notices table", c.ok("notices"), "KIND", "reminder", "10s", "due", "overdue", "rg-1/c1")
	mustContain(t, "notices -o wide", c.ok("notices", "-o", "wide"), "RESOURCE ID", testID)
	mustContain(t, "notices of another entity", c.ok("notices", "/w/nothing-here"), "no notice was sent")
	if got := decodeJSON[[]domain.Notice](t, c.ok("notices", "--kind", "due,overdue", "--since", "1h", "-o", "json")); len(got) != 2 || got[0].Kind != domain.NoticeDue {
		t.Errorf("notices --kind due,overdue: %+v", got)
	}
	if r := c.run("notices", "--limit", "1"); r.err != nil || strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stdout, "overdue") || !strings.Contains(r.stderr, "2 older notices not shown") {
		t.Errorf("notices --limit 1: %v\n%s\n%s", r.err, r.stdout, r.stderr)
	}
	if r := c.run("notices", "--kind", "late"); r.err == nil || !strings.Contains(r.err.Error(), "not a notice kind") {
		t.Errorf("notices --kind late: %v", r.err)
	}

	testenv.Eventually(t, 10*time.Second, "watch to show the notices", func() bool { return strings.Count(wOut.String(), `"notice"`) >= 3 })
	wcancel()
	if err := <-wDone; err != nil {
		t.Errorf("watch: %v", err)
	}
	// The applied outcome, and the notices in the order they were sent. Live, the two streams'
	// messages come as they arrive: the first notice may be sent between the record's write
	// and the outcome's publish.
	var applied int
	var noticed []string
	for _, line := range strings.Split(strings.TrimSpace(wOut.String()), "\n") {
		l := decodeJSON[struct {
			Notice  *domain.Notice `json:"notice"`
			Outcome domain.Outcome `json:"outcome"`
		}](t, line)
		switch {
		case l.Notice != nil:
			noticed = append(noticed, string(l.Notice.Kind))
		case l.Outcome == domain.OutcomeApplied:
			applied++
		}
	}
	if applied != 1 || len(noticed) < 3 || strings.Join(noticed[:3], " ") != "reminder due overdue" {
		t.Errorf("watch showed %d applied outcomes and the notices %v, want 1 and reminder due overdue:\n%s", applied, noticed, wOut.String())
	}
	stop()
}

// startNotices provisions a stack on a 1 s tick and runs `maintctl function notices --remind
// remind` on it; stop ends the function and fails the test if it failed.
func startNotices(t *testing.T, remind string) (s *stack, c *cli, stop func()) {
	t.Helper()
	s = startStack(t, stackOpts{})
	c = newCLI(t, s)
	c.ok("provision", "--tick", "1s", "--partitions", "2")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	fnDone := make(chan error, 1)
	var fnErr testenv.SyncBuffer
	go func() {
		fnDone <- run(ctx, []string{"function", "notices", "--remind", remind, "--stuck-after", "1h"}, c.getenv, &testenv.SyncBuffer{}, &fnErr)
	}()
	testenv.Eventually(t, 10*time.Second, "the notices function to start", func() bool { return strings.Contains(fnErr.String(), "function started") })
	return s, c, func() {
		cancel()
		if err := <-fnDone; err != nil {
			t.Fatalf("function notices: %v\n%s", err, fnErr.String())
		}
	}
}

// TestMinNotice_RefusesShortNoticeUnlessForced runs `maintctl function command --min-notice
// 24h`: an announcement with less notice is refused on window.start, the history says why, and
// a forced one goes through.
func TestMinNotice_RefusesShortNoticeUnlessForced(t *testing.T) {
	s := startStack(t, stackOpts{noFunction: true})
	c := newCLI(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"function", "command", "--min-notice", "24h"}, c.getenv, &testenv.SyncBuffer{}, &testenv.SyncBuffer{})
	}()
	r := c.run("pending", "--timeout", "15s", "--window-start", "+2h", "--window-end", "+4h", testID)
	if r.code() != exitRejected {
		t.Fatalf("short notice: exit %d (%v), want %d", r.code(), r.err, exitRejected)
	}
	mustContain(t, "short notice", r.stderr+r.err.Error(), "InvalidParameter", "window.start", "minimum notice")
	mustContain(t, "history", c.ok("history", testID), "rejected", "window.start", "minimum notice of 24h0m0s")

	c.ok("pending", "--window-start", "+48h", "--window-end", "+50h", testID)
	out := c.ok("pending", "--force", "--window-start", "+1h", "--window-end", "+2h", testID)
	mustContain(t, "forced short notice", out, "applied")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestNotices_DatedNoEarlierThanWhatTheyJudgeAndWatchSinceInAtOrder runs the notices function
// on a 1 s tick while Pending commands keep arriving (each announcing a window whose 30 s
// reminder is due at once, then another window for some), so that runs read records written
// after their tick. Every notice is dated no earlier than the stored time of the record
// revision it reports, nor its stateSince; `watch --since` replays events and notices in at
// order.
func TestNotices_DatedNoEarlierThanWhatTheyJudgeAndWatchSinceInAtOrder(t *testing.T) {
	s, c, stop := startNotices(t, "60s,30s")
	ctx := testenv.Context(t, time.Minute)

	// Every revision of every record, with the time the server stored it.
	type revision struct {
		rec    domain.Record
		stored time.Time
	}
	var mu sync.Mutex
	revs := map[string][]revision{}
	for _, cell := range domain.AllCells() {
		kv, err := s.JS.KeyValue(ctx, cell.RecordsBucket())
		if err != nil {
			t.Fatal(err)
		}
		w, err := kv.WatchAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = w.Stop() }()
		go func() {
			for e := range w.Updates() {
				if e == nil || e.Operation() != jetstream.KeyValuePut {
					continue
				}
				if rec, err := domain.DecodeRecord(e.Value()); err == nil {
					mu.Lock()
					revs[rec.ResourceID] = append(revs[rec.ResourceID], revision{rec, e.Created()})
					mu.Unlock()
				}
			}
		}()
	}

	ids := testenv.ResourceIDs("at", 24)
	for round, start := range []string{"+20s", "+25s"} {
		for i, id := range ids {
			if round == 1 && i%2 == 0 {
				continue // half the entities get a second window: a new series of notices
			}
			c.ok("pending", "--reason", "PUCM", "--window-start", start, "--window-end", "+50s", id)
		}
	}
	// Each entity's last window gets its reminder.
	testenv.Eventually(t, 30*time.Second, "a reminder of every entity's last window", func() bool {
		return testenv.StoredMsgs(s.JS, domain.NoticesStreams()...) >= uint64(len(ids)+len(ids)/2)
	})

	mu.Lock()
	defer mu.Unlock()
	ns := decodeJSON[[]domain.Notice](t, c.ok("notices", "-o", "json"))
	for _, n := range ns {
		if n.At.Before(n.StateSince) {
			t.Errorf("notice %s at %s, before the stateSince %s it reports", n.NoticeID, n.At.Format(time.RFC3339Nano), n.StateSince.Format(time.RFC3339Nano))
		}
		// The revision it judged is the first one that reads as the notice says, or a later one.
		var first *revision
		for i, r := range revs[n.ResourceID] {
			if r.rec.State == n.State && r.rec.StateSince.Equal(n.StateSince) && r.rec.Window != nil && n.Window != nil &&
				r.rec.Window.Start.Equal(n.Window.Start) && r.rec.Window.End.Equal(n.Window.End) {
				first = &revs[n.ResourceID][i]
				break
			}
		}
		switch {
		case first == nil:
			t.Errorf("notice %s: no stored revision reads as it says", n.NoticeID)
		case n.At.Before(first.stored):
			t.Errorf("notice %s at %s, before its record revision was stored (%s)", n.NoticeID, n.At.Format(time.RFC3339Nano), first.stored.Format(time.RFC3339Nano))
		}
	}

	var last time.Time
	lines := strings.Split(strings.TrimSpace(c.ok("watch", "--since", "10m", "--no-follow", "-o", "json")), "\n")
	if len(lines) < len(ns)+len(ids) {
		t.Fatalf("watch --since printed %d lines, want the %d notices and the outcomes", len(lines), len(ns))
	}
	for i, line := range lines {
		l := decodeJSON[struct {
			Notice *domain.Notice `json:"notice"`
			At     time.Time      `json:"at"`
		}](t, line)
		at := l.At
		if l.Notice != nil {
			at = l.Notice.At
		}
		if at.Before(last) {
			t.Errorf("watch --since line %d at %s, back in time from %s: %s", i+1, at.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano), line)
		}
		last = at
	}
	stop()
}
