package main

import (
	"context"
	"encoding/json"
	"maintsignals/test/testenv"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
)

func TestDLQ_ListAndReplay(t *testing.T) {
	s := startStack(t, stackOpts{noFunction: true})
	c := newCLI(t, s)
	rec := testenv.StartCommandsOverOutage(t, s.JS)

	mustContain(t, "empty dlq list", c.ok("dlq", "list"), "no dead letter in MAINT_DLQ")
	if docs := decodeJSON[[]letterJSON](t, c.ok("dlq", "list", "-o", "json")); len(docs) != 0 {
		t.Errorf("empty dlq list -o json = %+v", docs)
	}

	// The bucket is down: the command is dead-lettered, and the verb says so (status 2).
	rec.Down.Store(true)
	r := c.run("pending", "--id", "dl-1", "--reason", "window", testID)
	if r.code() != exitRejected {
		t.Fatalf("pending while the bucket is down: exit %d (%v), want %d\n%s", r.code(), r.err, exitRejected, r.stdout)
	}
	mustContain(t, "pending output", r.stdout, "dead-lettered Pending", "bucket unreachable", "MAINT_DLQ")

	out := c.ok("dlq", "list", "-o", "wide")
	mustContain(t, "dlq list", out, "SEQ", "TIME", "RESOURCE", "TASK", "COMMAND ID", "DELIVERIES", "REASON",
		testID, "Pending", "dl-1", "bucket unreachable")
	docs := decodeJSON[[]letterJSON](t, c.ok("dlq", "list", "-o", "json"))
	if len(docs) != 1 {
		t.Fatalf("dlq list -o json has %d letters, want 1: %+v", len(docs), docs)
	}
	l := docs[0]
	if l.CommandID != "dl-1" || l.ResourceID != testID || l.Task != domain.TaskPending || l.Key != domain.MustKey(testID) ||
		l.Deliveries != 2 || !strings.Contains(l.Reason, "bucket unreachable") || l.At.IsZero() || l.Seq == 0 {
		t.Errorf("letter = %+v", l)
	}
	var body domain.Command
	if err := json.Unmarshal(l.Body, &body); err != nil || body.ID != "dl-1" || body.Reason != "window" {
		t.Errorf("letter body = %s (%v)", l.Body, err)
	}

	// A sequence that is not there: a clear error, status 1, and nothing else happens.
	r = c.run("dlq", "replay", "999")
	if r.err == nil || r.code() != exitError {
		t.Fatalf("replay 999: exit %d (%v), want %d", r.code(), r.err, exitError)
	}
	mustContain(t, "replay 999 error", r.err.Error(), "dead letter not found", "no sequence 999", "maintctl dlq list")

	// The cause is gone: the replayed command is applied, and history shows it.
	rec.Down.Store(false)
	seq := strconv.FormatUint(l.Seq, 10)
	out = c.ok("dlq", "replay", seq)
	mustContain(t, "replay output", out, "replayed dead letter "+seq+": command dl-1 (Pending) for "+testID, "MAINT_COMMANDS sequence 2", "maintctl history")
	var evs []domain.Event
	testenv.Eventually(t, 10*time.Second, "the replayed command's outcome", func() bool {
		evs = decodeJSON[[]domain.Event](t, c.ok("history", "-o", "json", testID))
		return len(evs) == 2
	})
	if evs[0].Outcome != domain.OutcomeDeadLettered || evs[1].Outcome != domain.OutcomeApplied || evs[1].CommandID != "dl-1" || evs[1].To != domain.StatePending {
		t.Errorf("history = %+v, want dead_lettered then applied", evs)
	}
	mustContain(t, "dlq list after replay", c.ok("dlq", "list"), "no dead letter")

	// Replaying it again: it is gone.
	r = c.run("dlq", "replay", seq)
	if r.code() != exitError || !strings.Contains(r.err.Error(), "already replayed") {
		t.Errorf("second replay: exit %d (%v)", r.code(), r.err)
	}
	mustContain(t, "replay --all of nothing", c.ok("dlq", "replay", "--all"), "no dead letter to replay")
}

func TestDLQ_ReplayAllAsJSON(t *testing.T) {
	s := startStack(t, stackOpts{noFunction: true})
	c := newCLI(t, s)
	rec := testenv.StartCommandsOverOutage(t, s.JS)
	rec.Down.Store(true)
	for _, id := range []string{"all-1", "all-2"} {
		if r := c.run("customer-action", "--id", id, testID); r.code() != exitRejected {
			t.Fatalf("customer-action %s: exit %d (%v)", id, r.code(), r.err)
		}
	}
	// A dead letter whose body is not a command (as if a poison message had been copied).
	key := domain.MustKey(testID)
	m := nats.NewMsg(domain.DLQSubject(key))
	m.Data = []byte("not json")
	m.Header.Set(function.HeaderDLQReason, "poison")
	if _, err := s.JS.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	out := c.ok("dlq", "list", "-o", "wide")
	mustContain(t, "dlq list", out, "all-1", "all-2", "key "+key, "poison")
	docs := decodeJSON[[]letterJSON](t, c.ok("dlq", "list", "-o", "json"))
	if len(docs) != 3 || docs[2].BodyText != "not json" || docs[2].Body != nil || docs[2].Deliveries != 0 {
		t.Fatalf("dlq list -o json = %+v", docs)
	}

	rec.Down.Store(false)
	got := decodeJSON[[]replayJSON](t, c.ok("dlq", "replay", "--all", "-o", "json"))
	if len(got) != 3 {
		t.Fatalf("replay --all replayed %d, want 3: %+v", len(got), got)
	}
	for i, want := range []string{"all-1", "all-2", ""} {
		if got[i].CommandID != want || got[i].Seq != docs[i].Seq || got[i].Stream != domain.CommandsStream || got[i].StreamSeq == 0 || got[i].Key != key {
			t.Errorf("replayed %d = %+v, want command %q from seq %d", i, got[i], want, docs[i].Seq)
		}
	}
	// Two applied outcomes (the second a no-change CustomerActionNeeded) and one rejection.
	testenv.Eventually(t, 10*time.Second, "the replayed outcomes", func() bool {
		return len(decodeJSON[[]domain.Event](t, c.ok("history", "-o", "json", testID))) == 5
	})
	evs := decodeJSON[[]domain.Event](t, c.ok("history", "-o", "json", testID))
	var outcomes []string
	for _, ev := range evs {
		outcomes = append(outcomes, string(ev.Outcome))
	}
	if got := strings.Join(outcomes, " "); got != "dead_lettered dead_lettered applied applied rejected" {
		t.Errorf("outcomes = %s", got)
	}
	if docs := decodeJSON[[]letterJSON](t, c.ok("dlq", "list", "-o", "json")); len(docs) != 0 {
		t.Errorf("left after replay --all: %+v", docs)
	}
}

func TestDLQ_BadArguments(t *testing.T) {
	c := newCLI(t, nil)
	c.env["NATS_URL"] = "nats://127.0.0.1:1" // never reached
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"dlq", "replay"}, "needs the SEQ"},
		{[]string{"dlq", "replay", "--all", "3"}, "not both"},
		{[]string{"dlq", "replay", "x"}, `SEQ "x"`},
		{[]string{"dlq", "replay", "0"}, `SEQ "0"`},
		{[]string{"dlq", "list", "extra"}, "unknown command"},
		{[]string{"dlq", "frobnicate"}, "unknown command"},
	} {
		r := c.run(tt.args...)
		if r.err == nil || !strings.Contains(r.err.Error(), tt.want) || r.code() != exitError {
			t.Errorf("maintctl %q: exit %d, err = %v, want one containing %q", tt.args, r.code(), r.err, tt.want)
		}
	}
}

func TestDLQ_NotProvisioned(t *testing.T) {
	s := startStack(t, stackOpts{noProvision: true})
	c := newCLI(t, s)
	r := c.run("dlq", "list")
	if r.err == nil || !strings.Contains(r.err.Error(), "maintctl provision") {
		t.Errorf("dlq list without streams: %v", r.err)
	}
}
