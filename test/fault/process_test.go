package fault

// Scenarios b to e of the fault tests: every function replica is a real OS process of the
// maintctl binary built by TestMain, against a nats-server on loopback (embedded in the test
// process, or the one `maintctl up` embeds), provisioned with a 1 s tick. Each loads 5,000
// random commands over 50 entities through two command replicas (two emitter replicas run as
// well) and checks with testenv.Verify that every command has exactly one terminal outcome,
// none is lost, and the records equal the sequential model.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/store"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// verifyWait bounds how long Verify waits for the last outcomes.
const verifyWait = 2 * time.Minute

// TestProcess_CommandReplicaKilledMidLoad (scenario b): one of two command-function processes
// is killed with SIGKILL once a third of the commands is stored and being processed, the rest
// is published, and the process is started again a second later.
func TestProcess_CommandReplicaKilledMidLoad(t *testing.T) {
	needBinary(t)
	st := startStack(t)
	r := otlpreceiver.Start(t)
	victim := startFunction(t, "command-1", "command", st.url, commandEnv(r, "c1"))
	startFunction(t, "command-2", "command", st.url, commandEnv(r, "c2"))
	startFunction(t, "emitter-1", "emitter", st.url, procEnv())
	startFunction(t, "emitter-2", "emitter", st.url, procEnv())

	cmds := loadCmds(2, "fault-b")
	third := len(cmds) / 3
	testenv.PublishAll(t, st.js, cmds[:third], nil)
	// Processing is under way, far from done.
	if got := waitEvents(st.js, 100, 30*time.Second); got < 100 {
		t.Fatalf("only %d outcomes 30s after publishing %d commands", got, third)
	}
	outcomes := streamMsgs(st.js, domain.EventsStreams()...)
	killedAt := time.Now()
	victim.Kill()
	t.Logf("SIGKILL command-1 with %d commands stored and %d outcomes published", third, outcomes)

	testenv.PublishAll(t, st.js, cmds[third:], nil)
	time.Sleep(time.Until(killedAt.Add(time.Second)))
	startFunction(t, "command-1-again", "command", st.url, commandEnv(r, "c1-again"))
	t.Logf("command-1 started again %s after the kill, with %d outcomes published",
		time.Since(killedAt).Round(time.Millisecond), streamMsgs(st.js, domain.EventsStreams()...))
	// The dead replica's partitions move after the pinned TTL and the commands it held come
	// back after the ack wait (5 s each here); until then its partitions wait, to keep
	// per-entity order.
	time.Sleep(time.Until(killedAt.Add(6 * time.Second)))
	t.Logf("%d outcomes published 6s after the kill", streamMsgs(st.js, domain.EventsStreams()...))

	counts := testenv.Verify(t, st.js, cmds, verifyWait)
	time.Sleep(700 * time.Millisecond) // one more metrics export of each process
	t.Logf("messages processed per replica: %v", totals(processed(r)))
	t.Logf("counts: %v", counts)
	t.Log(countsLine("b", counts, "n/a"))
}

// TestProcess_ShardHolderKilled (scenario c): two emitter processes share the shards of a
// 4 s tick (the pinned TTL, 3 s, is shorter than the tick, as it is at the default minute).
// The one that is exporting is killed with SIGKILL in the middle of its run; its shards' pins
// move to the other replica, and the next tick is emitted whole, every entity once, by the
// survivor, within a tick. The load runs at the same time through two command processes.
func TestProcess_ShardHolderKilled(t *testing.T) {
	needBinary(t)
	const every = 4 * time.Second
	st := startStackTicking(t, every)
	r := otlpreceiver.Start(t)
	// A slow collector keeps each run in flight for a while, so that the kill lands inside one.
	const hold = 250 * time.Millisecond
	r.SetDelay(hold)
	target := strings.TrimPrefix(r.GRPCEndpoint(), "http://")

	startFunction(t, "command-1", "command", st.url, procEnv())
	startFunction(t, "command-2", "command", st.url, procEnv())
	names := []string{"A", "B"}
	taps := map[string]*tap{}
	emitters := map[string]*proc{}
	for _, n := range names {
		taps[n] = startTap(t, target)
		env := procEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+taps[n].endpoint(), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_RESOURCE_ATTRIBUTES=replica="+n)
		emitters[n] = startFunction(t, "emitter-"+n, "emitter", st.url, env)
	}
	cmds := loadCmds(3, "fault-c")
	testenv.PublishAll(t, st.js, cmds, nil)

	// The replicas spread the shards over a few balance periods: wait for a tick they share.
	shared, err := awaitShared(r, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tick at %s emitted whole by %s", shared.tick.Format("15:04:05"), shared.replica)

	// Find a run in flight: exactly one emitter has just sent a request.
	var victim string
	deadline := time.Now().Add(30 * time.Second)
	for victim == "" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		var active []string
		for _, n := range names {
			if taps[n].sentWithin(hold / 2) {
				active = append(active, n)
			}
		}
		if len(active) == 1 {
			victim = active[0]
		}
	}
	if victim == "" {
		t.Fatal("no emitter run was caught in flight within 30s")
	}
	survivor := names[0]
	if victim == survivor {
		survivor = names[1]
	}
	emitters[victim].Kill()
	killedAt := time.Now()
	t.Logf("SIGKILL emitter %s in the middle of a run (%d of %d outcomes published)", victim, streamMsgs(st.js, domain.EventsStreams()...), len(cmds))

	// The next tick after the kill: whole, by the survivor alone, within a tick and its run.
	next := awaitTickAfter(t, r, killedAt, 2*every+5*time.Second, "the first whole emission of a tick after the kill")
	t.Logf("tick at +%s after the kill emitted whole by %s, %s after the kill", next.tick.Sub(killedAt).Round(time.Millisecond), next.replica, next.at.Sub(killedAt).Round(time.Millisecond))
	if next.replica != survivor {
		t.Errorf("the next tick was emitted by %q, want %s alone", next.replica, survivor)
	}
	if next.tick.Sub(killedAt) > every+500*time.Millisecond {
		t.Errorf("the first whole emission is of the tick %s after the kill, want the next tick (within %s)", next.tick.Sub(killedAt), every)
	}
	// The load may still be changing which entities are tracked: that tick exported none twice,
	// and a tick once the load is over exports every entity of the bucket once.
	checkOnceEach(t, next, nil)

	counts := testenv.Verify(t, st.js, cmds, verifyWait)
	after := awaitTickAfter(t, r, time.Now(), 2*every+5*time.Second, "a whole emission after the load")
	checkOnceEach(t, after, bucketStates(t, st.js))
	ems := emissions(r)
	gap, at := maxGap(ems)
	if gap > 2*every {
		t.Errorf("whole emissions %d and %d are %s apart, want at most 2 ticks", ems[at-1].seq, ems[at].seq, gap)
	}
	t.Logf("%d whole emissions; longest gap %s", len(ems), gap.Round(time.Millisecond))
	t.Logf("counts: %v", counts)
	t.Log(countsLine("c", counts, gap.Round(time.Millisecond).String()))
}

// awaitShared waits for a whole emission sent by more than one replica.
func awaitShared(r *otlpreceiver.Receiver, timeout time.Duration) (emission, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, e := range emissions(r) {
			if len(e.replicas) > 1 {
				return e, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return emission{}, fmt.Errorf("no tick emitted by two replicas within %s", timeout)
}

// awaitTickAfter waits for the first whole emission of a tick after at.
func awaitTickAfter(t *testing.T, r *otlpreceiver.Receiver, at time.Time, within time.Duration, what string) emission {
	t.Helper()
	var found emission
	testenv.Eventually(t, within, what, func() bool {
		for _, e := range emissions(r) {
			if e.tick.After(at) {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// checkOnceEach checks that an emission carries every entity of the bucket exactly once
// (one status point at 1), under its state then or a later one; with a nil bucket, that it
// carries none twice.
func checkOnceEach(t *testing.T, e emission, bucket map[string]string) {
	t.Helper()
	ones := map[string]int{}
	for _, p := range e.export.Find(statusMetric, nil) {
		if p.Value == 1 {
			ones[p.Attrs["cloud.resource_id"]]++
		}
	}
	if bucket == nil {
		for id, n := range ones {
			if n != 1 {
				t.Errorf("tick at %s: %s exported %d times, want once", e.tick.Format("15:04:05"), id, n)
			}
		}
		return
	}
	for id := range bucket {
		if ones[id] != 1 {
			t.Errorf("tick at %s: %s exported %d times, want once", e.tick.Format("15:04:05"), id, ones[id])
		}
	}
	if len(ones) != len(bucket) {
		t.Errorf("tick at %s: %d entities exported, the bucket holds %d", e.tick.Format("15:04:05"), len(ones), len(bucket))
	}
}

// TestProcess_CollectorDown (scenario d): the OTLP collector is down for 4 ticks while the
// load runs and an entity changes state. When it is back, emissions resume within about a
// tick, without a burst for the missed ticks, and carry the state as it is then.
func TestProcess_CollectorDown(t *testing.T) {
	needBinary(t)
	st := startStack(t)
	r := otlpreceiver.Start(t)
	startFunction(t, "command-1", "command", st.url, procEnv())
	startFunction(t, "command-2", "command", st.url, procEnv())
	startFunction(t, "emitter-A", "emitter", st.url, procEnv(otelEnv(r, "A")...))
	startFunction(t, "emitter-B", "emitter", st.url, procEnv(otelEnv(r, "B")...))

	cmds := loadCmds(4, "fault-d")
	third := len(cmds) / 3
	testenv.PublishAll(t, st.js, cmds[:third], nil)
	first, err := awaitEmission(t, r, 0, 10*time.Second)
	if err != nil {
		t.Fatalf("no emission: %v", err)
	}
	if _, err := awaitEmission(t, r, first.seq, 3*time.Second); err != nil {
		t.Fatalf("no second emission: %v", err)
	}

	const outage = 4 * time.Second
	stoppedAt := time.Now()
	r.Stop()
	t.Logf("collector stopped")
	// While it is down: the rest of the load, and, once a tick has come and gone (its run
	// could not export), a probe entity that becomes Pending.
	testenv.PublishAll(t, st.js, cmds[third:], nil)
	time.Sleep(time.Until(stoppedAt.Add(outage / 2)))
	probe := testenv.ResourceIDs("probe-d", 1)[0]
	probeCmd := domain.Command{ID: "probe-d-pending", ResourceID: probe, Task: domain.TaskPending, Reason: "set while the collector is down", Actor: "fault"}
	testenv.PublishAll(t, st.js, []domain.Command{probeCmd}, nil)
	if !waitOutcome(t, st.js, probe, 20*time.Second) {
		t.Fatal("the probe command has no outcome")
	}
	time.Sleep(time.Until(stoppedAt.Add(outage)))
	before := r.Len()
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	restartedAt := time.Now()

	e1, err := awaitEmission(t, r, before, 10*time.Second)
	if err != nil {
		t.Fatalf("no emission after the collector came back: %v", err)
	}
	resume := e1.at.Sub(restartedAt)
	t.Logf("first emission after the restart: #%d by %s, %s after it", e1.seq, e1.replica, resume.Round(time.Millisecond))
	if slack := time.Second; resume > tick+slack {
		t.Errorf("first emission %s after the collector came back, want within a tick (%s) + %s", resume, tick, slack)
	}
	if got := currentStates(e1.export)[probe]; got != "pending" {
		t.Errorf("first emission after the outage shows the probe entity as %q, want pending (set during the outage): "+
			"a run that began while the collector was down sent, late, the state it read then", got)
	}

	// No burst: about one whole emission per tick in the 3 s after recovery, not one per missed
	// tick.
	const window = 3 * time.Second
	time.Sleep(time.Until(restartedAt.Add(window + 300*time.Millisecond)))
	inWindow := 0
	var offsets []string
	for _, e := range emissions(r) {
		if !e.at.Before(restartedAt) && e.at.Before(restartedAt.Add(window)) {
			inWindow++
			offsets = append(offsets, "+"+e.at.Sub(restartedAt).Round(time.Millisecond).String())
		}
	}
	t.Logf("%d whole emissions in the %s after recovery (at %s)", inWindow, window, strings.Join(offsets, ", "))
	if inWindow < 2 || inWindow > 4 {
		t.Errorf("%d whole emissions in the %s after recovery, want about 3", inWindow, window)
	}

	counts := testenv.Verify(t, st.js, cmds, verifyWait)

	// With the load done, an emission equals the bucket, entity by entity.
	e2, err := awaitEmission(t, r, r.Len(), 5*time.Second)
	if err != nil {
		t.Fatalf("no emission after the load: %v", err)
	}
	want := bucketStates(t, st.js)
	got := currentStates(e2.export)
	if len(got) != len(want) {
		t.Errorf("emission #%d carries %d entities, the bucket %d", e2.seq, len(got), len(want))
	}
	for id, s := range want {
		if got[id] != s {
			t.Errorf("emission #%d: %s is %q, the bucket says %q", e2.seq, id, got[id], s)
		}
	}
	ems := emissions(r)
	gap, _ := maxGap(ems)
	t.Logf("%d emissions; longest gap %s (the outage was %s)", len(ems), gap.Round(time.Millisecond), outage)
	if gap > outage+2*tick {
		t.Errorf("longest gap between emissions %s, want at most the outage %s + 2 ticks", gap, outage)
	}
	t.Logf("counts: %v", counts)
	t.Log(countsLine("d", counts, gap.Round(time.Millisecond).String()))
}

// waitOutcome waits until an outcome event exists for the entity.
func waitOutcome(t *testing.T, js jetstream.JetStream, resourceID string, timeout time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if len(testenv.Events(t, js, domain.EventSubject(domain.MustKey(resourceID)))) > 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bucketStates reads every record the signal carries: resource ID → emitted state name. A
// forgotten entity (the load sends Forget too) is out of the signal.
func bucketStates(t *testing.T, js jetstream.JetStream) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := store.Open(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	err = s.Scan(ctx, func(en store.Entry, derr error) error {
		if derr != nil {
			return derr
		}
		if !en.Record.Forgotten() {
			out[en.Record.ResourceID] = stateAttr(en.Record.State)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestProcess_StackRestartedOnSameStore (scenario e): `maintctl up` (NATS, streams, bucket,
// schedule and one replica of each function), with one more command and emitter process
// against it, is stopped with SIGTERM mid-load and started again on the same data directory
// while commands keep coming. Nothing is lost and the schedule keeps firing.
func TestProcess_StackRestartedOnSameStore(t *testing.T) {
	needBinary(t)
	r := otlpreceiver.Start(t)
	port := testenv.FreePort(t)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	upArgs := []string{"up", "--listen", "127.0.0.1:" + strconv.Itoa(port), "--data", t.TempDir(), "--tick", tick.String(), "--metrics-listen", ""}
	up := startProc(t, "up-1", commandEnv(r, "up-1"), upArgs...)
	up.WaitFor("ready:", time.Minute)
	startFunction(t, "command-ext", "command", url, commandEnv(r, "command-ext"))
	startFunction(t, "emitter-ext", "emitter", url, procEnv(otelEnv(r, "emitter-ext")...))

	js := testenv.JetStream(t, connectURL(t, url))
	cmds := loadCmds(5, "fault-e")
	third := len(cmds) / 3
	testenv.PublishAll(t, js, cmds[:third], nil)
	if got := waitEvents(js, 100, 30*time.Second); got < 100 {
		t.Fatalf("only %d outcomes 30s after publishing %d commands", got, third)
	}
	if _, err := awaitEmission(t, r, 0, 10*time.Second); err != nil {
		t.Fatalf("no emission before the restart: %v", err)
	}
	lastTick := lastTickSeq(js)

	// The rest is published in small chunks while the stack stops and starts. The publisher
	// reports to pubT, so that it never touches t once the test is over (should it end early).
	published := make(chan struct{})
	pubT := &collectTB{TB: t}
	var quit atomic.Bool
	t.Cleanup(func() { quit.Store(true) })
	go func() {
		defer close(published)
		rest := cmds[third:]
		for len(rest) > 0 && !quit.Load() {
			n := min(100, len(rest))
			testenv.PublishAll(pubT, js, rest[:n], nil)
			rest = rest[n:]
			time.Sleep(30 * time.Millisecond)
		}
	}()
	outcomes := streamMsgs(js, domain.EventsStreams()...)
	termAt := time.Now()
	if err := up.Term(time.Minute); err != nil {
		t.Errorf("maintctl up after SIGTERM: %v", err)
	}
	stopped := time.Since(termAt)
	if !up.LogContains("stopped") {
		t.Errorf("maintctl up did not report a clean stop")
	}
	up = startProc(t, "up-2", commandEnv(r, "up-2"), upArgs...)
	up.WaitFor("ready:", time.Minute)
	restartedAt := time.Now()
	before := r.Len()
	t.Logf("SIGTERM to `maintctl up` with %d outcomes published; it stopped in %s; ready again %s after the SIGTERM",
		outcomes, stopped.Round(time.Millisecond), restartedAt.Sub(termAt).Round(time.Millisecond))
	select {
	case <-published:
	case <-time.After(3 * time.Minute):
		t.Fatal("publishing did not finish")
	}
	for _, e := range pubT.errors() {
		t.Errorf("publisher: %s", e)
	}

	counts := testenv.Verify(t, js, cmds, verifyWait)

	// The schedule fires again: new ticks in MAINT_SCHEDULE, and emissions arrive.
	e, err := awaitEmission(t, r, before, 5*time.Second)
	if err != nil {
		t.Errorf("no emission after the restart: %v", err)
	} else {
		t.Logf("emission #%d by %s %s after the restart", e.seq, e.replica, e.at.Sub(restartedAt).Round(time.Millisecond))
	}
	if seq := lastTickSeq(js); seq <= lastTick {
		t.Errorf("no new tick after the restart: last tick #%d, before the restart #%d", seq, lastTick)
	}
	// Both emitters serve ticks after the restart. Whichever reconnects first may pin every
	// shard; the runtime's balancing (every 5 s) hands some to the other within a few ticks.
	var ems []emission
	byReplica := map[string]int{}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		ems = emissions(r)
		clear(byReplica)
		for _, e := range ems {
			if e.at.After(restartedAt) {
				for rep := range e.replicas {
					byReplica[rep]++
				}
			}
		}
		if byReplica["up-2"] > 0 && byReplica["emitter-ext"] > 0 || time.Now().After(deadline) {
			break
		}
	}
	gap, _ := maxGap(ems)
	t.Logf("%d emissions; after the restart by replica: %v; longest gap %s", len(ems), byReplica, gap.Round(time.Millisecond))
	// The restarted stack's emitter, and the separate process that rode out the restart of its
	// NATS server.
	for _, rep := range []string{"up-2", "emitter-ext"} {
		if byReplica[rep] == 0 {
			t.Errorf("no emission by %s after the restart", rep)
		}
	}
	time.Sleep(700 * time.Millisecond) // one more metrics export of each process
	done := totals(processed(r))
	t.Logf("messages processed per process (SDK metrics; up-N counts its command and emitter functions): %v", done)
	for _, rep := range []string{"up-2", "command-ext"} {
		if done[rep] == 0 {
			t.Errorf("%s processed no message", rep)
		}
	}
	// Two ticks and one more for a machine busy with other tests: an emission sweeps the
	// cells' buckets one after another, and on a loaded machine the first after the restart
	// can finish most of a tick late (1.6 s alone, up to 2.8 s with the suite's other
	// packages beside it).
	if limit := restartedAt.Sub(termAt) + 3*tick; gap > limit {
		t.Errorf("longest gap between emissions %s, want at most the downtime + 3 ticks (%s)", gap, limit)
	}
	t.Logf("counts: %v", counts)
	t.Log(countsLine("e", counts, gap.Round(time.Millisecond).String()))
}

// lastTickSeq is the stream sequence of the newest tick (0 when none can be read).
func lastTickSeq(js jetstream.JetStream) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, domain.ScheduleStream)
	if err != nil {
		return 0
	}
	m, err := s.GetLastMsgForSubject(ctx, domain.TickSubject)
	if err != nil {
		return 0
	}
	return m.Sequence
}
