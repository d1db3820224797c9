package notices_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"maintsignals/functions/notices"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/test/testenv"
)

// The tests below drive replicas with a settable clock, one run per step (what one tick
// does), against a real server; TestNotices_OnTheScheduleTick runs the function on real ticks.
// The ladder is 60 s and 30 s; windows start at t0+100 s and end at t0+160 s.

// t0 is later than any record the tests store: a run judges a record as of when it was stored
// when that is later than the run's time (a record written after the tick), and these steps
// are runs after the writes.
var t0 = time.Date(2037, 12, 1, 8, 0, 0, 0, time.UTC)

func sec(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func pendingRecord(id string, start, end time.Time) domain.Record {
	return domain.Record{ResourceID: id, State: domain.StatePending, Window: &domain.Window{Start: start, End: end}, StateSince: t0}
}

// steps runs replica n at each of the given seconds after t0.
func steps(t *testing.T, n *notices.Notifier, clk *clock, secs ...int) {
	t.Helper()
	for _, s := range secs {
		clk.Set(sec(s))
		run(t, n)
	}
}

// every returns the seconds from..to by step.
func every(from, to, step int) []int {
	var out []int
	for s := from; s <= to; s += step {
		out = append(out, s)
	}
	return out
}

func TestNotices_AnnouncedWindowRunToItsEnd(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Second))
	clk := &clock{}
	id := clusterID(1)
	put(t, env.JS, pendingRecord(id, sec(100), sec(160)))
	n := newNotifier(t, env.JS, clk)

	steps(t, n, clk, every(0, 200, 5)...)
	if got := stored(t, env.JS, id); !equal(got, "reminder/60", "reminder/30", "due/0", "overdue/0") {
		t.Fatalf("notices %v, want reminder/60 reminder/30 due/0 overdue/0", got)
	}
	all := storedNotices(t, env.JS)
	wantAt := []time.Time{sec(40), sec(70), sec(100), sec(160)}
	for i, nt := range all {
		if nt.ResourceID != id || nt.State != domain.StatePending || !nt.StateSince.Equal(t0) ||
			nt.Window == nil || !nt.Window.Start.Equal(sec(100)) || !nt.Window.End.Equal(sec(160)) {
			t.Errorf("notice %d: %+v does not describe the entity", i, nt)
		}
		if !nt.At.Equal(wantAt[i]) {
			t.Errorf("notice %d (%s) at %s, want the first run at its stage, %s", i, nt.Kind, nt.At.Sub(t0), wantAt[i].Sub(t0))
		}
	}
	// Nothing is read once the replica knows the last stage is stored.
	clk.Set(sec(300))
	if res := run(t, n); res.Read != 0 || res.Published != 0 {
		t.Errorf("a run after the end read %d and published %d, want neither", res.Read, res.Published)
	}
}

func TestNotices_LateAnnouncementSendsOnlyTheNearestRung(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Second))
	clk := &clock{}
	id := clusterID(1)
	// Announced 20 s ahead: both rungs are already due; only the 30 s one is sent.
	put(t, env.JS, pendingRecord(id, sec(20), sec(80)))
	n := newNotifier(t, env.JS, clk)
	steps(t, n, clk, every(0, 100, 5)...)
	if got := stored(t, env.JS, id); !equal(got, "reminder/30", "due/0", "overdue/0") {
		t.Fatalf("notices %v, want reminder/30 due/0 overdue/0", got)
	}
}

func TestNotices_ReplacedWindowRestartsTheLadder(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Second))
	clk := &clock{}
	id := clusterID(1)
	put(t, env.JS, pendingRecord(id, sec(100), sec(160)))
	n := newNotifier(t, env.JS, clk)
	steps(t, n, clk, 50) // reminder/60 of the first window
	// A new Pending moves the window: the old ladder stops, the new one starts.
	put(t, env.JS, pendingRecord(id, sec(200), sec(260)))
	steps(t, n, clk, every(55, 280, 5)...)
	all := storedNotices(t, env.JS)
	if got := stored(t, env.JS, id); !equal(got, "reminder/60", "reminder/60", "reminder/30", "due/0", "overdue/0") {
		t.Fatalf("notices %v, want reminder/60 of the first window, then the whole ladder of the second", got)
	}
	if !all[0].Window.Start.Equal(sec(100)) || !all[1].Window.Start.Equal(sec(200)) || !all[1].At.Equal(sec(140)) {
		t.Errorf("windows %s then %s (at %s), want the first then the second at its rung", all[0].Window.Start.Sub(t0), all[1].Window.Start.Sub(t0), all[1].At.Sub(t0))
	}
	if all[0].NoticeID == all[1].NoticeID {
		t.Errorf("two windows share the notice id %s", all[0].NoticeID)
	}
}

func TestNotices_StartOrClearStopsTheLadder(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Second))
	clk := &clock{}
	started, cleared := clusterID(1), clusterID(2)
	put(t, env.JS, pendingRecord(started, sec(100), sec(160)))
	put(t, env.JS, pendingRecord(cleared, sec(100), sec(160)))
	n := newNotifier(t, env.JS, clk)
	steps(t, n, clk, 50)
	// maintctl start: Planned, updating, the window kept; maintctl clear: None, no window.
	put(t, env.JS, domain.Record{ResourceID: started, State: domain.StatePlanned, Updating: true, Task: domain.TaskEverything,
		Window: &domain.Window{Start: sec(100), End: sec(160)}, StateSince: sec(52), UpdatedAt: sec(52), LastCommandSeq: 7})
	put(t, env.JS, domain.Record{ResourceID: cleared, State: domain.StateNone, StateSince: sec(52)})
	steps(t, n, clk, every(55, 300, 5)...)
	if got := stored(t, env.JS, cleared); !equal(got, "reminder/60") {
		t.Errorf("cleared entity: notices %v, want reminder/60 only", got)
	}
	// The update itself has a notice of its own once it runs past the stuck limit (1 min).
	if got := stored(t, env.JS, started); !equal(got, "reminder/60", "stuck/0") {
		t.Errorf("started entity: notices %v, want reminder/60, then stuck/0 only", got)
	}
	for _, nt := range storedNotices(t, env.JS) {
		if nt.Kind == domain.NoticeStuck && (!nt.At.Equal(sec(115)) || nt.State != domain.StatePlanned) {
			t.Errorf("stuck notice at %s in %s, want at the first run past 52 s + 1 min, in Planned", nt.At.Sub(t0), nt.State)
		}
	}
	// A new update (another command) is another series: it gets its own stuck notice.
	put(t, env.JS, domain.Record{ResourceID: started, State: domain.StatePlanned, Updating: true, Task: domain.TaskOperatorUpdate,
		StateSince: sec(52), UpdatedAt: sec(310), LastCommandSeq: 9})
	steps(t, n, clk, every(305, 400, 5)...)
	if got := stored(t, env.JS, started); !equal(got, "reminder/60", "stuck/0", "stuck/0") {
		t.Errorf("started entity after a second update: notices %v, want a second stuck/0", got)
	}
}

func TestNotices_CrashBetweenDecidingAndPublishing(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Second))
	clk := &clock{}
	id := clusterID(1)
	put(t, env.JS, pendingRecord(id, sec(100), sec(160)))
	a := newNotifier(t, env.JS, clk)
	a.SetHooks(func(domain.Notice) error { return errCrash }, nil)
	clk.Set(sec(45))
	if _, err := a.RunOnce(testenv.Context(t, 5*time.Second)); err == nil {
		t.Fatal("the killed run reported success")
	}
	if got := stored(t, env.JS, id); len(got) != 0 {
		t.Fatalf("notices %v stored by a replica killed before publishing", got)
	}
	// The next tick, served by a fresh replica (nothing in memory), publishes it once.
	b := newNotifier(t, env.JS, clk)
	steps(t, b, clk, 46, 47)
	if got := stored(t, env.JS, id); !equal(got, "reminder/60") {
		t.Fatalf("notices %v, want reminder/60 once", got)
	}
	checkOnce(t, env.JS)
}

func TestNotices_CrashBetweenPublishingAndRemembering(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Second))
	clk := &clock{}
	id := clusterID(1)
	put(t, env.JS, pendingRecord(id, sec(100), sec(160)))
	a := newNotifier(t, env.JS, clk)
	a.SetHooks(nil, func(domain.Notice) error { return errCrash })
	clk.Set(sec(45))
	if _, err := a.RunOnce(testenv.Context(t, 5*time.Second)); err == nil {
		t.Fatal("the killed run reported success")
	}
	// A fresh replica and the killed one (which remembers nothing of it) on the next ticks.
	b := newNotifier(t, env.JS, clk)
	a.SetHooks(nil, nil)
	steps(t, b, clk, 46)
	steps(t, a, clk, 47)
	steps(t, b, clk, every(50, 200, 10)...)
	if got := stored(t, env.JS, id); !equal(got, "reminder/60", "reminder/30", "due/0", "overdue/0") {
		t.Fatalf("notices %v, want each stage once", got)
	}
	checkOnce(t, env.JS)
}

func TestNotices_TwoReplicasRacingOnOneTick(t *testing.T) {
	t.Parallel()
	t.Run("same decision", func(t *testing.T) {
		t.Parallel()
		env := testenv.Start(t, testenv.WithTick(time.Second))
		clk := &clock{now: sec(45)}
		const entities = 10 // fewer than a replica's workers, so that every entity is decided at once
		for i := range entities {
			put(t, env.JS, pendingRecord(clusterID(i), sec(100), sec(160)))
		}
		// Both replicas decide every entity's notice before either publishes any.
		var decided sync.WaitGroup
		decided.Add(2 * entities)
		hold := func(domain.Notice) error { decided.Done(); decided.Wait(); return nil }
		a, b := newNotifier(t, env.JS, clk), newNotifier(t, env.JS, clk)
		a.SetHooks(hold, nil)
		b.SetHooks(hold, nil)
		var wg sync.WaitGroup
		for _, n := range []*notices.Notifier{a, b} {
			wg.Add(1)
			go func() { defer wg.Done(); run(t, n) }()
		}
		wg.Wait()
		if got := stored(t, env.JS, ""); len(got) != entities {
			t.Fatalf("%d notices stored for %d entities: %v", len(got), entities, got)
		}
		checkOnce(t, env.JS)
	})
	t.Run("different stages, the later publish loses", func(t *testing.T) {
		t.Parallel()
		env := testenv.Start(t, testenv.WithTick(time.Second))
		id := clusterID(1)
		put(t, env.JS, pendingRecord(id, sec(100), sec(160)))
		// Replica a runs at 45 s (rung 60 due); b, a tick later at 75 s (rung 30 due), read the
		// entity's last notice before a published.
		a := newNotifier(t, env.JS, &clock{now: sec(45)})
		b := newNotifier(t, env.JS, &clock{now: sec(75)})
		bRead, aStored := make(chan struct{}), make(chan struct{})
		a.SetHooks(func(domain.Notice) error { <-bRead; return nil }, func(domain.Notice) error { close(aStored); return nil })
		var bOnce sync.Once
		b.SetHooks(func(domain.Notice) error {
			bOnce.Do(func() { close(bRead); <-aStored })
			return nil
		}, nil)
		var wg sync.WaitGroup
		var resB notices.Result
		wg.Add(2)
		go func() { defer wg.Done(); run(t, a) }()
		go func() { defer wg.Done(); resB = run(t, b) }()
		wg.Wait()
		if got := stored(t, env.JS, id); !equal(got, "reminder/60", "reminder/30") {
			t.Fatalf("notices %v, want reminder/60 then reminder/30", got)
		}
		if resB.Read != 2 {
			t.Errorf("the losing replica read the last notice %d times, want 2 (its publish refused, then read again)", resB.Read)
		}
	})
}

func TestNotices_ManyReplicasManyEntities(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Second))
	clk := &clock{}
	const entities = 30
	for i := range entities {
		put(t, env.JS, pendingRecord(clusterID(i), sec(100+i), sec(160+i)))
	}
	reps := []*notices.Notifier{newNotifier(t, env.JS, clk), newNotifier(t, env.JS, clk), newNotifier(t, env.JS, clk)}
	for _, s := range every(0, 220, 3) {
		clk.Set(sec(s))
		var wg sync.WaitGroup
		for _, n := range reps {
			wg.Add(1)
			go func() { defer wg.Done(); run(t, n) }()
		}
		wg.Wait()
	}
	for i := range entities {
		if got := stored(t, env.JS, clusterID(i)); !equal(got, "reminder/60", "reminder/30", "due/0", "overdue/0") {
			t.Errorf("entity %d: notices %v", i, got)
		}
	}
	checkOnce(t, env.JS)
}

func TestNotices_RestartOfTheWholeStackMidLadder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := testenv.StartIn(t, dir)
	clk := &clock{}
	id := clusterID(1)
	put(t, env.JS, pendingRecord(id, sec(100), sec(160)))
	steps(t, newNotifier(t, env.JS, clk), clk, every(0, 75, 5)...)
	env.NC.Close()
	env.Server.Stop()

	env = testenv.StartIn(t, dir)
	n := newNotifier(t, env.JS, clk)
	steps(t, n, clk, every(75, 200, 5)...)
	if got := stored(t, env.JS, id); !equal(got, "reminder/60", "reminder/30", "due/0", "overdue/0") {
		t.Fatalf("notices %v across the restart, want each stage once", got)
	}
	checkOnce(t, env.JS)
}

// TestNotices_OnTheScheduleTick runs two replicas of the function on the real 1 s schedule
// with a ladder of seconds, and a window run to its end.
func TestNotices_OnTheScheduleTick(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Second))
	now := time.Now()
	id := clusterID(1)
	// Each stage lasts 5 s, five ticks (a busy machine may stall a few): reminder 10 s,
	// reminder 5 s, due, then overdue.
	start := now.Add(15 * time.Second)
	put(t, env.JS, domain.Record{ResourceID: id, State: domain.StatePending, Window: &domain.Window{Start: start, End: start.Add(5 * time.Second)}, StateSince: now})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		n, err := notices.New(testenv.Context(t, 5*time.Second), env.JS, notices.Config{
			Remind: []time.Duration{10 * time.Second, 5 * time.Second}, Tick: time.Second, Logger: testenv.Quiet(),
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := function.Run(ctx, env.JS, n.RuntimeConfig()); err != nil {
				t.Errorf("notices function: %v", err)
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	deadline := start.Add(5*time.Second + 10*time.Second)
	for time.Now().Before(deadline) {
		if got := stored(t, env.JS, id); len(got) == 4 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // two more ticks: nothing more may come
	if got := stored(t, env.JS, id); !equal(got, "reminder/10", "reminder/5", "due/0", "overdue/0") {
		t.Fatalf("notices %v, want reminder/10 reminder/5 due/0 overdue/0", got)
	}
	checkOnce(t, env.JS)
}

// A run that cannot publish every due notice in time leaves the rest to the next runs, which
// carry on where it stopped: every entity gets its notice, once.
func TestNotices_RunsThatStopShortCarryOnWhereTheyStopped(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Second))
	clk := &clock{}
	clk.Set(sec(50)) // every window's 60 s reminder is due
	const entities = 120
	for i := range entities {
		put(t, env.JS, pendingRecord(clusterID(i), sec(100), sec(160)))
	}
	// A tick of 400 ms bounds a run to 300 ms; each publish takes 40 ms here, 16 at a time.
	n, err := notices.New(testenv.Context(t, 5*time.Second), env.JS, notices.Config{
		Remind: ladder, Tick: 400 * time.Millisecond, Now: clk.Now, Logger: testenv.Quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	n.SetHooks(func(domain.Notice) error { time.Sleep(40 * time.Millisecond); return nil }, nil)
	// A publish cut off at the deadline may be stored without its run hearing the ack, so the
	// runs' own counts may fall short of what is stored; the stream is what a user sees.
	incomplete := 0
	for run := 0; run < 20; run++ {
		_, err := n.RunOnce(testenv.Context(t, 5*time.Second))
		if err == nil {
			break
		}
		incomplete++
	}
	if incomplete == 0 {
		t.Fatal("every run finished in time; the test needs runs that stop short")
	}
	if got := len(stored(t, env.JS, "")); got != entities {
		t.Errorf("%d notices stored after %d runs that stopped short for %d entities due", got, incomplete, entities)
	}
	checkOnce(t, env.JS)
}

// Shards split the entities: each shard's run publishes the notices of its own entities only,
// and the shards together publish every one.
func TestNotices_ShardsPublishTheirOwnEntities(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Second))
	clk := &clock{}
	clk.Set(sec(50))
	const entities = 40
	for i := range entities {
		put(t, env.JS, pendingRecord(clusterID(i), sec(100), sec(160)))
	}
	n := newNotifier(t, env.JS, clk)
	total := 0
	for s := range 4 {
		shard := domain.Shard{Index: s, Of: 4}
		before := len(stored(t, env.JS, ""))
		if _, err := n.RunShards(testenv.Context(t, 10*time.Second), []domain.Shard{shard}); err != nil {
			t.Fatal(err)
		}
		for _, nt := range storedNotices(t, env.JS)[before:] {
			if !shard.Holds(domain.MustKey(nt.ResourceID)) {
				t.Errorf("shard %d published a notice of %s, of shard %d", s, nt.ResourceID, domain.ShardOf(domain.MustKey(nt.ResourceID), 4))
			}
			total++
		}
	}
	if total != entities {
		t.Errorf("the shards published %d notices for %d entities due", total, entities)
	}
	checkOnce(t, env.JS)
}

// TestNotices_DatedNoEarlierThanTheRevisionTheyJudge: runs whose tick time comes before records
// written while they run (commands arriving between the tick and the sweep's read) date each
// notice no earlier than the stored time of the record it reports, nor its stateSince, with the
// ids a run at the tick would give them: each notice once.
func TestNotices_DatedNoEarlierThanTheRevisionTheyJudge(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Second))
	clk := &clock{}
	n := newNotifier(t, env.JS, clk)
	const rounds, perRound = 4, 6
	for r := range rounds {
		clk.Set(time.Now().UTC()) // the tick, before this round's commands are stored
		written := make(chan struct{})
		go func() {
			defer close(written)
			for i := range perRound {
				now := time.Now().UTC()
				put(t, env.JS, domain.Record{ResourceID: clusterID(r*perRound + i), State: domain.StatePending, StateSince: now,
					Window: &domain.Window{Start: now.Add(20 * time.Second), End: now.Add(50 * time.Second)}})
			}
		}()
		run(t, n) // while the commands arrive
		<-written
		run(t, n) // after them, still at the tick
	}
	checkOnce(t, env.JS)
	all := storedNotices(t, env.JS)
	if len(all) != rounds*perRound {
		t.Fatalf("%d notices, want one reminder for each of the %d entities", len(all), rounds*perRound)
	}
	for _, nt := range all {
		kv, loc := testenv.RecordBucket(t, env.JS, domain.MustKey(nt.ResourceID))
		e, err := kv.Get(testenv.Context(t, 5*time.Second), loc)
		if err != nil {
			t.Fatal(err)
		}
		if nt.At.Before(e.Created()) || nt.At.Before(nt.StateSince) {
			t.Errorf("notice %s at %s, before its record was stored (%s) or its stateSince (%s)", nt.NoticeID,
				nt.At.Format(time.RFC3339Nano), e.Created().Format(time.RFC3339Nano), nt.StateSince.Format(time.RFC3339Nano))
		}
	}
}
