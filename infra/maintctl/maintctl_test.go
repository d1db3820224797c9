package main

import (
	"context"
	"encoding/json"
	"errors"
	"maintsignals/test/testenv"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"maintsignals/shared/client"
	"maintsignals/shared/domain"
)

const testID = "/subscriptions/0b1f/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1"

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("output is not the expected JSON: %v\n%s", err, s)
	}
	return v
}

func TestKey_WorksOffline(t *testing.T) {
	c := newCLI(t, nil)
	c.env["NATS_URL"] = "nats://127.0.0.1:1" // nothing listens there
	out := c.ok("key", testID)
	if want := domain.MustKey(testID) + "\n"; out != want {
		t.Errorf("key printed %q, want %q", out, want)
	}
	doc := decodeJSON[map[string]string](t, c.ok("key", "-o", "json", "/A.B"))
	if doc["key"] != "a=2eb" || doc["resourceId"] != "/A.B" || doc["bucket"] != domain.CellOf("a=2eb").RecordsBucket() || doc["recordKey"] != "_._.a=2eb" {
		t.Errorf("key -o json = %v", doc)
	}
	// Where the record is, as `nats kv get` takes it: the cell's bucket, then the located key.
	key := domain.MustKey(testID)
	if out, want := c.ok("key", "--record", testID), domain.CellOf(key).RecordsBucket()+" "+domain.Located(key)+"\n"; out != want {
		t.Errorf("key --record printed %q, want %q", out, want)
	}
	r := c.run("key", "/")
	if r.err == nil || !strings.Contains(r.err.Error(), "empty") {
		t.Errorf("key of / = %v, want an invalid resource ID error", r.err)
	}
}

func TestVerbs_UpdateLifecycle(t *testing.T) {
	s := startStack(t, stackOpts{})
	c := newCLI(t, s)

	out := c.ok("pending", "--reason", "planned upgrade", "--window-start", "2030-04-01T02:00:00Z", "--window-end", "2030-04-01T06:00:00Z", testID)
	mustContain(t, "pending output", out, "applied Pending: None → Pending", "state", "Pending", "2030-04-01T02:00:00Z → 2030-04-01T06:00:00Z", "planned upgrade")

	// Flags after the resource ID work as well (interspersed).
	out = c.ok("start", testID, "--task", "operatorupdate")
	mustContain(t, "start output", out, "applied OperatorUpdate: Pending → Planned", "yes, task OperatorUpdate")

	out = c.ok("succeeded", testID)
	mustContain(t, "succeeded output", out, "applied UpdateSucceeded: Planned → None")

	rec := decodeJSON[map[string]any](t, c.ok("get", "-o", "json", testID))
	if rec["state"] != "None" || rec["updating"] != false || rec["exists"] != true || rec["resourceId"] != testID {
		t.Errorf("get -o json = %v", rec)
	}
	if rec["key"] != domain.MustKey(testID) {
		t.Errorf("key = %v", rec["key"])
	}

	evs := decodeJSON[[]domain.Event](t, c.ok("history", "-o", "json", testID))
	wantTasks := []domain.Task{domain.TaskPending, domain.TaskOperatorUpdate, domain.TaskUpdateSucceeded}
	if len(evs) != len(wantTasks) {
		t.Fatalf("history has %d events, want %d: %+v", len(evs), len(wantTasks), evs)
	}
	for i, ev := range evs {
		if ev.Task != wantTasks[i] || ev.Outcome != domain.OutcomeApplied || ev.Actor != "sre-test" {
			t.Errorf("event %d = %+v, want %s applied by sre-test", i, ev, wantTasks[i])
		}
	}
	if evs[0].Reason != "planned upgrade" {
		t.Errorf("first event reason = %q", evs[0].Reason)
	}

	hist := c.ok("history", testID)
	mustContain(t, "history table", hist, "TIME", "TASK", "OUTCOME", "None → Pending", "Pending → Planned", "Planned → None")
	mustContain(t, "history -o wide", c.ok("history", "-o", "wide", testID), "ACTOR", "sre-test", "REASON", "planned upgrade", "COMMAND ID", testID)
	if lines := strings.Count(strings.TrimSpace(hist), "\n"); lines != 3 {
		t.Errorf("history table has %d rows, want header + 3:\n%s", lines+1, hist)
	}
}

func TestVerbs_RejectedExitsNonZeroWithCodeAndMessage(t *testing.T) {
	s := startStack(t, stackOpts{})
	c := newCLI(t, s)
	r := c.run("succeeded", testID)
	var oe *client.OutcomeError
	if !errors.As(r.err, &oe) {
		t.Fatalf("succeeded with nothing updating: err = %v, want an OutcomeError\n%s", r.err, r.stdout)
	}
	if r.code() != exitRejected {
		t.Errorf("exit code %d, want %d", r.code(), exitRejected)
	}
	if oe.Event.Code != domain.CodeRequestNotAllowed || oe.Event.Target != "task" {
		t.Errorf("event = %+v", oe.Event)
	}
	mustContain(t, "error", r.err.Error(), "rejected", "RequestNotAllowed", "task", "no update is in progress")
	mustContain(t, "stdout", r.stdout, "rejected UpdateSucceeded: RequestNotAllowed (task)", "None (never seen)")

	// JSON output still carries the outcome for scripts, with the same exit code.
	r = c.run("failed", "-o", "json", "--error", "boom", testID)
	if r.code() != exitRejected {
		t.Fatalf("exit code %d, want %d: %v", r.code(), exitRejected, r.err)
	}
	doc := decodeJSON[resultJSON](t, r.stdout)
	if doc.Outcome.Outcome != domain.OutcomeRejected || doc.Outcome.Code != domain.CodeRequestNotAllowed || doc.Record.State != domain.StateNone {
		t.Errorf("failed -o json = %+v", doc)
	}
}

func TestVerbs_ForceEndsAnAbandonedUpdate(t *testing.T) {
	s := startStack(t, stackOpts{})
	c := newCLI(t, s)
	c.ok("start", testID)
	r := c.run("clear", testID)
	if r.code() != exitRejected {
		t.Fatalf("clear while updating: exit %d (%v), want %d", r.code(), r.err, exitRejected)
	}
	out := c.ok("clear", "--force", "--reason", "updater died", "--actor", "oncall", testID)
	mustContain(t, "forced clear", out, "applied None: Unplanned → None (forced)")
	evs := decodeJSON[[]domain.Event](t, c.ok("history", "-o", "json", testID))
	last := evs[len(evs)-1]
	if !last.Force || last.Actor != "oncall" || last.Reason != "updater died" {
		t.Errorf("last event = %+v", last)
	}
}

func TestVerbs_FailedAndCustomerAction(t *testing.T) {
	s := startStack(t, stackOpts{})
	c := newCLI(t, s)
	c.ok("start", "--task", "CertificatesRenewal", testID)
	if r := c.run("failed", testID); r.err == nil || !strings.Contains(r.err.Error(), "--error") {
		t.Errorf("failed without --error: %v", r.err)
	}
	c.ok("failed", "--error", "cert-manager timed out", testID)
	rec := decodeJSON[recordJSON](t, c.ok("get", "-o", "json", testID))
	if rec.State != domain.StateUnplanned || rec.Updating || rec.LastError != "cert-manager timed out" {
		t.Errorf("after failed: %+v", rec)
	}
	c.ok("customer-action", testID)
	rec = decodeJSON[recordJSON](t, c.ok("get", "-o", "json", testID))
	if rec.State != domain.StateCustomerActionNeeded {
		t.Errorf("after customer-action: %+v", rec)
	}
}

func TestVerbs_SameIDTwiceChangesNothing(t *testing.T) {
	s := startStack(t, stackOpts{})
	c := newCLI(t, s)
	first := decodeJSON[resultJSON](t, c.ok("pending", "-o", "json", "--id", "change-42", testID))
	second := decodeJSON[resultJSON](t, c.ok("pending", "-o", "json", "--id", "change-42", testID))
	if !second.Republished {
		t.Errorf("second send not reported as republished: %+v", second)
	}
	if second.Outcome.CommandID != "change-42" || second.Outcome.Outcome != domain.OutcomeApplied || second.Outcome.Revision != first.Outcome.Revision {
		t.Errorf("second outcome = %+v, want the first one %+v", second.Outcome, first.Outcome)
	}
	evs := decodeJSON[[]domain.Event](t, c.ok("history", "-o", "json", testID))
	if len(evs) != 1 {
		t.Errorf("history has %d events, want 1", len(evs))
	}
}

func TestVerbs_NoOutcomeWithoutCommandFunction(t *testing.T) {
	s := startStack(t, stackOpts{noFunction: true})
	c := newCLI(t, s)
	r := c.run("pending", "--timeout", "700ms", testID)
	if r.code() != exitNoResult {
		t.Fatalf("exit code %d (%v), want %d", r.code(), r.err, exitNoResult)
	}
	mustContain(t, "error", r.err.Error(), "no outcome", "timed out", "stored in MAINT_COMMANDS", "Is a command function running?", "maintctl up")

	// --no-wait stores the command and returns at once.
	out := c.ok("clear", "--no-wait", "--id", "nowait-1", testID)
	mustContain(t, "clear --no-wait", out, "stored command nowait-1 (None)", "MAINT_COMMANDS sequence 2")
}

func TestVerbs_InvalidInputIsRefusedBeforeSending(t *testing.T) {
	s := startStack(t, stackOpts{noFunction: true})
	c := newCLI(t, s)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"pending", "--window-start", "+2h", testID}, "both"},
		{[]string{"pending", "--window-start", "+2h", "--window-end", "+1h", testID}, "must be after"},
		{[]string{"pending", "--window-start", "tomorrow", "--window-end", "+1h", testID}, "RFC 3339"},
		{[]string{"start", "--task", "Pending", testID}, "not an update task"},
		{[]string{"pending", "--id", "has space", testID}, "InvalidParameter (id)"},
		{[]string{"pending", "--actor", "a\x01", testID}, "InvalidParameter (actor)"},
		{[]string{"pending"}, "needs a RESOURCE-ID"},
		{[]string{"pending", "a", "b"}, "takes one RESOURCE-ID"},
		{[]string{"pending", "/"}, "invalid resource ID"},
		{[]string{"pending", "--timeout", "0s", testID}, "--timeout"},
		{[]string{"get", "-o", "yaml", testID}, "use table, wide, name or json"},
		{[]string{"get", "--log-level", "loud", testID}, "--log-level"},
		{[]string{"get", "--bogus", testID}, "unknown flag"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"list", "--state", "maybe"}, "is not a state"},
		{[]string{"up", "--nodes", "2"}, "use 1, or 3 or 5"},
		{[]string{"up", "--listen", "nohost"}, "host:port"},
		{[]string{"function"}, "needs one NAME"},
		{[]string{"function", "bogus"}, "unknown function"},
	}
	for _, tt := range tests {
		r := c.run(tt.args...)
		if r.err == nil || !strings.Contains(r.err.Error(), tt.want) {
			t.Errorf("maintctl %q: err = %v, want one containing %q", tt.args, r.err, tt.want)
			continue
		}
		if r.code() != exitError {
			t.Errorf("maintctl %q: exit code %d, want %d", tt.args, r.code(), exitError)
		}
	}
	// Nothing reached the stream.
	info, err := s.JS.Stream(context.Background(), domain.CommandsStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 0 {
		t.Errorf("%d commands stored, want 0", n)
	}
}

func TestCannotConnectSaysWhatToDo(t *testing.T) {
	c := newCLI(t, nil)
	c.env["NATS_URL"] = "127.0.0.1:1"
	for _, args := range [][]string{{"get", testID}, {"pending", testID}, {"list"}, {"provision"}} {
		r := c.run(args...)
		if r.err == nil {
			t.Fatalf("%v: no error", args)
		}
		mustContain(t, "error of "+args[0], r.err.Error(), "cannot connect", "nats://127.0.0.1:1", "maintctl up", "NATS_URL")
	}
}

func TestGetUnknownEntity(t *testing.T) {
	s := startStack(t, stackOpts{noFunction: true})
	c := newCLI(t, s)
	out := c.ok("get", "/never/seen")
	mustContain(t, "get", out, "None (never seen)", "/never/seen")
	rec := decodeJSON[recordJSON](t, c.ok("get", "-o", "json", "/never/seen"))
	if rec.Exists || rec.State != domain.StateNone || rec.Revision != 0 || rec.ResourceID != "/never/seen" {
		t.Errorf("get -o json of an unknown entity = %+v", rec)
	}
	mustContain(t, "history", c.ok("history", "/never/seen"), "no command was ever sent")
	if evs := decodeJSON[[]domain.Event](t, c.ok("history", "-o", "json", "/never/seen")); len(evs) != 0 {
		t.Errorf("history -o json = %v, want []", evs)
	}
}

func TestList_FiltersByLooseState(t *testing.T) {
	s := startStack(t, stackOpts{})
	c := newCLI(t, s)
	if out := c.ok("list"); !strings.Contains(out, "no entity") {
		t.Errorf("empty list: %q", out)
	}
	c.ok("pending", "/e/b")
	c.ok("customer-action", "/e/A")
	c.ok("start", "/e/c")

	all := decodeJSON[[]recordJSON](t, c.ok("list", "-o", "json"))
	var ids []string
	for _, r := range all {
		ids = append(ids, r.ResourceID)
	}
	if strings.Join(ids, " ") != "/e/A /e/b /e/c" {
		t.Errorf("list = %v, want sorted /e/A /e/b /e/c", ids)
	}
	for _, st := range []string{"customer_action_needed", "CUSTOMERACTIONNEEDED", "customerActionNeeded"} {
		got := decodeJSON[[]recordJSON](t, c.ok("list", "--state", st, "-o", "json"))
		if len(got) != 1 || got[0].ResourceID != "/e/A" {
			t.Errorf("list --state %s = %+v", st, got)
		}
	}
	out := c.ok("list", "--state", "unplanned")
	mustContain(t, "list table", out, "NAME", "/e/c", "Unplanned", "Everything")
	if strings.Contains(out, "/e/b") {
		t.Errorf("list --state unplanned shows /e/b:\n%s", out)
	}
	if out := c.ok("list", "--state", "planned"); !strings.Contains(out, "no entity in state Planned") {
		t.Errorf("list --state planned = %q", out)
	}
}

func TestWatch_PrintsLiveEventsUntilInterrupted(t *testing.T) {
	s := startStack(t, stackOpts{})
	c := newCLI(t, s)

	type watch struct {
		out, errOut *testenv.SyncBuffer
		done        chan error
		cancel      context.CancelFunc
	}
	startWatch := func(args ...string) *watch {
		ctx, cancel := context.WithCancel(context.Background())
		w := &watch{out: &testenv.SyncBuffer{}, errOut: &testenv.SyncBuffer{}, done: make(chan error, 1), cancel: cancel}
		go func() { w.done <- run(ctx, args, c.getenv, w.out, w.errOut) }()
		testenv.Eventually(t, 10*time.Second, "watch to start", func() bool { return strings.Contains(w.errOut.String(), "watching outcome events") })
		return w
	}
	all := startWatch("watch", "-o", "json")
	one := startWatch("watch", "/w/one")

	c.ok("pending", "/w/other")
	c.ok("pending", "--reason", "r1", "/w/one")
	r := c.run("succeeded", "/w/one")
	if r.code() != exitRejected {
		t.Fatalf("succeeded: %v", r.err)
	}
	testenv.Eventually(t, 10*time.Second, "3 JSON lines", func() bool { return strings.Count(all.out.String(), "\n") >= 3 })
	testenv.Eventually(t, 10*time.Second, "2 lines of /w/one", func() bool { return strings.Count(one.out.String(), "\n") >= 2 })
	all.cancel()
	one.cancel()
	for _, w := range []*watch{all, one} {
		select {
		case err := <-w.done:
			if err != nil {
				t.Errorf("watch returned %v after interrupt, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("watch did not stop when interrupted")
		}
	}
	lines := strings.Split(strings.TrimSpace(all.out.String()), "\n")
	var outcomes []string
	for _, l := range lines {
		ev := decodeJSON[domain.Event](t, l)
		outcomes = append(outcomes, ev.ResourceID+":"+string(ev.Outcome))
	}
	if got := strings.Join(outcomes, " "); got != "/w/other:applied /w/one:applied /w/one:rejected" {
		t.Errorf("watch -o json saw %s", got)
	}
	oneOut := one.out.String()
	if strings.Contains(oneOut, "/w/other") {
		t.Errorf("watch /w/one shows another entity:\n%s", oneOut)
	}
	mustContain(t, "watch /w/one", oneOut, "None → Pending", "r1", "RequestNotAllowed")
}

func TestProvision_IdempotentAndReportsFailures(t *testing.T) {
	s := startStack(t, stackOpts{noProvision: true})
	c := newCLI(t, s)
	out := c.ok("provision", "--tick", "30s", "--partitions", "4")
	mustContain(t, "first provision", out, "MAINT_COMMANDS", "created", "command-p3", "schedule")
	docs := decodeJSON[[]changeJSON](t, c.ok("provision", "--tick", "30s", "--partitions", "4", "-o", "json"))
	for _, d := range docs {
		if d.Action != "unchanged" {
			t.Errorf("second provision: %+v", d)
		}
	}
	// The commands out per partition can change on a live stream.
	out = c.ok("provision", "--tick", "30s", "--partitions", "4", "--in-flight", "16")
	if !regexp.MustCompile(`command-p0 +updated +max_ack_pending`).MatchString(out) {
		t.Errorf("in-flight change: command-p0 not updated (max_ack_pending):\n%s", out)
	}
	// Three replicas cannot be placed on one server: reported, non-zero exit.
	r := c.run("provision", "--tick", "30s", "--partitions", "4", "--replicas", "3")
	if r.err == nil || r.code() != exitError {
		t.Fatalf("replicas 3 on one server: err = %v\n%s", r.err, r.stdout)
	}
	mustContain(t, "report", r.stdout, "failed")
	if r := c.run("provision", "--replicas", "2"); r.err == nil || !strings.Contains(r.err.Error(), "replicas") {
		t.Errorf("--replicas 2: %v", r.err)
	}
}

func TestFunctionCommand_ServesUntilInterrupted(t *testing.T) {
	s := startStack(t, stackOpts{noFunction: true})
	c := newCLI(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var errOut testenv.SyncBuffer
	go func() {
		done <- run(ctx, []string{"function", "command", "--log-format", "json"}, c.getenv, &testenv.SyncBuffer{}, &errOut)
	}()

	out := c.ok("pending", "--timeout", "15s", testID)
	mustContain(t, "pending", out, "applied Pending")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("function command returned %v, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("function command did not stop")
	}
	// Logs are JSON lines.
	for _, l := range strings.Split(strings.TrimSpace(errOut.String()), "\n") {
		decodeJSON[map[string]any](t, l)
	}
	mustContain(t, "logs", errOut.String(), `"function":"command"`, "command applied")
}

func TestFunctionEmitter_StartsAndStops(t *testing.T) {
	s := startStack(t, stackOpts{noFunction: true})
	c := newCLI(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var errOut testenv.SyncBuffer
	go func() {
		done <- run(ctx, []string{"function", "emitter", "--retention", "1h", "--pucm"}, c.getenv, &testenv.SyncBuffer{}, &errOut)
	}()
	testenv.Eventually(t, 10*time.Second, "the emitter to start", func() bool { return strings.Contains(errOut.String(), "function started") })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("function emitter returned %v, want nil\n%s", err, errOut.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("function emitter did not stop")
	}
}

func TestUp_PortInUseFailsAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := newCLI(t, nil)
	start := time.Now()
	r := c.run("up", "--listen", ln.Addr().String(), "--data", t.TempDir(), "--metrics-listen", "")
	if r.err == nil || !strings.Contains(r.err.Error(), "another --listen") {
		t.Errorf("up on a port in use: %v", r.err)
	}
	r = c.run("up", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--metrics-listen", "", "--monitor-listen", ln.Addr().String())
	if r.err == nil || !strings.Contains(r.err.Error(), "--monitor-listen") {
		t.Errorf("up with the monitoring port in use: %v", r.err)
	}
	r = c.run("up", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--metrics-listen", ln.Addr().String())
	if r.err == nil || !strings.Contains(r.err.Error(), "--metrics-listen") {
		t.Errorf("up with the metrics port in use: %v", r.err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s to fail", d)
	}
}

var listenRE = regexp.MustCompile(`listening on (nats://\S+)`)

func TestUp_InProcessKeepsStateAcrossRestart(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	c := newCLI(t, nil)
	args := []string{"up", "--listen", "127.0.0.1:0", "--data", data, "--tick", "1s", "--metrics-listen", "127.0.0.1:0"}

	startUp := func() (url string, stop func() result) {
		u := startUpInProcess(t, c, 20*time.Second, args...)
		m := listenRE.FindStringSubmatch(u.out.String())
		if m == nil {
			t.Fatalf("up did not print where it listens:\n%s", u.out)
		}
		mustContain(t, "up output", u.out.String(), "provisioned:", "MAINT_EVENTS", "metrics: http://127.0.0.1:", "/metrics", "functions: command")
		return m[1], u.stop
	}

	url, stop := startUp()
	c.env["NATS_URL"] = url
	c.ok("pending", testID)
	c.ok("start", testID)

	// A second `up` on the same data directory is refused while the first runs.
	r := c.run("up", "--listen", "127.0.0.1:0", "--data", data, "--metrics-listen", "")
	if r.err == nil || !strings.Contains(r.err.Error(), "in use") {
		t.Errorf("second up on the same data: %v", r.err)
	}

	res := stop()
	if res.err != nil {
		t.Fatalf("up after interrupt: %v", res.err)
	}
	mustContain(t, "up output", res.stdout, "stopped")

	url, stop = startUp()
	c.env["NATS_URL"] = url
	rec := decodeJSON[recordJSON](t, c.ok("get", "-o", "json", testID))
	if rec.State != domain.StatePlanned || !rec.Updating {
		t.Errorf("after restart: %+v", rec)
	}
	c.ok("succeeded", testID)
	if evs := decodeJSON[[]domain.Event](t, c.ok("history", "-o", "json", testID)); len(evs) != 3 {
		t.Errorf("history after restart has %d events, want 3", len(evs))
	}
	if res := stop(); res.err != nil {
		t.Fatalf("second up: %v", res.err)
	}
}
