package dlq_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"maintsignals/functions/command"
	"maintsignals/shared/dlq"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/signing"
	"maintsignals/test/testenv"
)

const cluster = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/dlq-1"

func TestReplay_DeadLetterIsAppliedOnceTheCauseIsGone(t *testing.T) {
	env := testenv.Start(t)
	rec := testenv.StartCommandsOverOutage(t, env.JS)
	rec.Down.Store(true)
	ctx := testenv.Context(t, time.Minute)

	m := testenv.CommandMsg(domain.Command{ID: "r-1", ResourceID: cluster, Task: domain.TaskPending})
	if _, err := env.JS.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	var letters []dlq.Letter
	testenv.Eventually(t, 10*time.Second, "a dead letter", func() bool {
		var err error
		if letters, err = dlq.List(ctx, env.JS); err != nil {
			t.Fatal(err)
		}
		return len(letters) > 0
	})
	l := letters[0]
	if l.CommandID != "r-1" || l.Key != domain.MustKey(cluster) || !strings.Contains(l.Reason, "bucket unreachable") || l.Deliveries != 2 {
		t.Fatalf("letter %+v", l)
	}

	rec.Down.Store(false)
	if _, err := dlq.Replay(ctx, env.JS, l.Seq); err != nil {
		t.Fatal(err)
	}
	key := domain.MustKey(cluster)
	for deadline := time.Now().Add(10 * time.Second); ; {
		r, _, err := rec.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if r.State == domain.StatePending && r.LastCommandID == "r-1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replayed command not applied: %+v", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if left, _ := dlq.List(ctx, env.JS); len(left) != 0 {
		t.Fatalf("replayed letter still listed: %+v", left)
	}
	// Replaying it again is harmless: the letter is gone.
	if _, err := dlq.Replay(ctx, env.JS, l.Seq); !errors.Is(err, dlq.ErrNotFound) {
		t.Fatalf("second replay: %v, want ErrNotFound", err)
	}
}

func TestReplay_AppliedCommandComesBackAsDuplicate(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = command.Run(ctx, env.JS, command.Config{}) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	key := domain.MustKey(cluster)
	cmd := domain.Command{ID: "r-2", ResourceID: cluster, Task: domain.TaskPending}
	if _, err := env.JS.PublishMsg(ctx, testenv.CommandMsg(cmd)); err != nil {
		t.Fatal(err)
	}
	// A copy of the applied command lands in the DLQ (as if an operator had put it there).
	copyMsg := testenv.CommandMsg(cmd)
	copyMsg.Subject = domain.DLQSubject(key)
	ack, err := env.JS.PublishMsg(ctx, copyMsg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitEvents(t, env.JS, key, 1, 10*time.Second)
	if _, err := dlq.Replay(ctx, env.JS, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	evs := testenv.WaitEvents(t, env.JS, key, 2, 10*time.Second)
	if evs[0].Outcome != domain.OutcomeApplied || evs[1].Outcome != domain.OutcomeDuplicate {
		t.Fatalf("outcomes %+v, want applied then duplicate", evs)
	}
}

func TestReplay_KeepsTheSignature(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	key := domain.MustKey(cluster)
	m := testenv.CommandMsg(domain.Command{ID: "signed-1", ResourceID: cluster, Task: domain.TaskPending})
	m.Subject = domain.DLQSubject(key)
	m.Header.Set(signing.HeaderSigner, "UABC")
	m.Header.Set(signing.HeaderSignature, "c2ln")
	ack, err := env.JS.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	sent, err := dlq.Replay(ctx, env.JS, ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := env.JS.Stream(ctx, domain.CommandsStream)
	got, err := s.GetMsg(ctx, sent.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if got.Header.Get(signing.HeaderSigner) != "UABC" || got.Header.Get(signing.HeaderSignature) != "c2ln" || string(got.Data) != string(m.Data) {
		t.Fatalf("replayed command lost its signature or body: %v %s", got.Header, got.Data)
	}
}

// TestReplayEach_ReplaysWhatIsThereAndNamesWhatIsNot: the sequences given are replayed in
// their order, one that is not there is reported and does not stop the others, and all
// replays every dead letter left, oldest first.
func TestReplayEach_ReplaysWhatIsThereAndNamesWhatIsNot(t *testing.T) {
	env := testenv.Start(t)
	ctx := testenv.Context(t, 20*time.Second)
	var seqs []uint64
	for _, cid := range []string{"e-1", "e-2", "e-3"} {
		body, err := domain.Command{ID: cid, ResourceID: cluster, Task: domain.TaskNone}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(domain.DLQSubject(domain.MustKey(cluster)))
		m.Data = body
		m.Header.Set(function.HeaderDLQReason, "test")
		ack, err := env.JS.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	r, err := dlq.ReplayEach(ctx, env.JS, []uint64{seqs[1], 999, seqs[0]}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Done) != 2 || r.Done[0].Letter.CommandID != "e-2" || r.Done[1].Letter.CommandID != "e-1" || r.Done[0].Ack.Stream != domain.CommandsStream {
		t.Errorf("replayed %+v, want e-2 then e-1 to %s", r.Done, domain.CommandsStream)
	}
	if len(r.Missing) != 1 || r.Missing[0] != 999 {
		t.Errorf("missing %v, want [999]", r.Missing)
	}
	if c := r.Done[0].Letter.Command(); c.ResourceID != cluster || c.Task != domain.TaskNone {
		t.Errorf("the letter's command reads %+v", c)
	}
	r, err = dlq.ReplayEach(ctx, env.JS, nil, true)
	if err != nil || len(r.Done) != 1 || r.Done[0].Letter.CommandID != "e-3" || len(r.Missing) != 0 {
		t.Fatalf("replay all = %+v, %v; want e-3 alone", r, err)
	}
	if letters, err := dlq.List(ctx, env.JS); err != nil || len(letters) != 0 {
		t.Errorf("left: %+v, %v", letters, err)
	}
}
