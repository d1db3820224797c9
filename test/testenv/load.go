package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// ResourceIDs makes n distinct cluster resource IDs (with upper case and dots, as in real life).
// The subscription part is scrambled rather than the index again: the commands stream picks a
// key's partition by FNV-1a modulo the partition count, whose low bits see only the low bits
// of each byte, and the index written twice cancels out there (50 such IDs fell in 2 of 8
// partitions, so load tests exercised a quarter of the parallelism).
func ResourceIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = ResourceID(prefix, i)
	}
	return ids
}

// ResourceID is the i-th of ResourceIDs(prefix, n), for a load that makes entities as it goes.
func ResourceID(prefix string, i int) string {
	sub := uint64(i) * 0x9e3779b97f4a7c15 & (1<<48 - 1) // a bijection on 48 bits: distinct
	return fmt.Sprintf("/subscriptions/0b1f6471-1bf0-4dda-aec3-%012x/resourceGroups/rg-%s/providers/Microsoft.RedHatOpenShift/openShiftClusters/%s.%03d", sub, prefix, prefix, i)
}

// RandomCommands makes n commands over the given entities with every task, forced or not,
// including ones the state machine will refuse.
func RandomCommands(rng *rand.Rand, n int, ids []string) []domain.Command {
	cmds := make([]domain.Command, n)
	for i := range cmds {
		c := domain.Command{
			ID:         fmt.Sprintf("cmd-%06d", i),
			ResourceID: ids[rng.IntN(len(ids))],
			Task:       domain.Tasks[rng.IntN(len(domain.Tasks))],
			Force:      rng.IntN(8) == 0,
			Actor:      "load",
		}
		switch c.Task {
		case domain.TaskUpdateFailed:
			c.Error = fmt.Sprintf("failure %d", i)
		case domain.TaskPending:
			if rng.IntN(2) == 0 {
				s := time.Date(2026, 12, 1+rng.IntN(20), 0, 0, 0, 0, time.UTC)
				c.Window = &domain.Window{Start: s, End: s.Add(time.Duration(1+rng.IntN(8)) * time.Hour)}
				c.Reason = "announced"
			}
		}
		cmds[i] = c
	}
	return cmds
}

// PublishAll publishes the commands as fast as the server takes them, with their ids as
// Nats-Msg-Id, and retries a failed publish with the same id until it is stored (a publish that
// timed out may have been stored; the id makes the retry harmless). onAcked, if set, is called
// with the number of commands stored so far.
func PublishAll(t testing.TB, js jetstream.JetStream, cmds []domain.Command, onAcked func(int)) {
	t.Helper()
	const window = 256
	pending := make([]jetstream.PubAckFuture, 0, window)
	acked := 0
	expired := make(chan time.Time)
	close(expired)
	settle := func() {
		// One wait for the whole window: acks lost with a killed server never come, and waiting
		// for each of them in turn would stall the load for minutes.
		deadline := time.After(10 * time.Second)
		for _, f := range pending {
			select {
			case <-f.Ok():
			case <-f.Err():
				publishSync(t, js, f.Msg())
			case <-deadline:
				deadline = expired // the rest are published again at once (same ids)
				publishSync(t, js, f.Msg())
			}
			acked++
			if onAcked != nil {
				onAcked(acked)
			}
		}
		pending = pending[:0]
	}
	for _, c := range cmds {
		m := CommandMsg(c)
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			publishSync(t, js, m)
			acked++
			continue
		}
		pending = append(pending, f)
		if len(pending) == window {
			settle()
		}
	}
	settle()
}

// CommandMsg is the message an integrator publishes for a command.
func CommandMsg(c domain.Command) *nats.Msg {
	b, _ := json.Marshal(c)
	m := nats.NewMsg(domain.CommandSubject(domain.MustKey(c.ResourceID)))
	m.Data = b
	m.Header.Set(domain.HeaderMsgID, c.ID)
	return m
}

func publishSync(t testing.TB, js jetstream.JetStream, m *nats.Msg) {
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		again := nats.NewMsg(m.Subject)
		again.Data, again.Header = m.Data, m.Header
		_, err := js.PublishMsg(ctx, again)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("publish %s: %v", m.Header.Get(domain.HeaderMsgID), err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Counts sums up what became of the commands of a load.
type Counts struct {
	Sent, Applied, Rejected, DeadLettered, Duplicate, Lost, MultipleOutcomes int
}

func (c Counts) String() string {
	return fmt.Sprintf("sent %d, applied %d, rejected %d, dead-lettered %d, duplicate %d, lost %d, more than one outcome %d",
		c.Sent, c.Applied, c.Rejected, c.DeadLettered, c.Duplicate, c.Lost, c.MultipleOutcomes)
}

// Verify waits (up to wait) until every sent command has an outcome, then checks that each has
// exactly one terminal outcome and that every entity's outcomes and final record equal a
// sequential application of its commands, in the order the stream stored them, through the
// pure state machine (dead-lettered commands are not applied). It reports the counts. Every
// sent command counts as acknowledged (PublishAll retries until it is stored); RunAudit does
// the work.
func Verify(t testing.TB, js jetstream.JetStream, sent []domain.Command, wait time.Duration) Counts {
	t.Helper()
	want := map[string]bool{}
	for _, c := range sent {
		want[c.ID] = true
	}
	a := RunAudit(t, js, AuditInput{Ours: func(id string) bool { return want[id] }, Acked: want, Wait: wait})
	for _, d := range a.Doubled {
		t.Errorf("command %s", d)
	}
	for _, id := range a.AckedMissed {
		t.Errorf("command %s is not in the commands stream", id)
	}
	if len(a.NoOutcome) > 0 {
		t.Errorf("%d commands have no outcome", len(a.NoOutcome))
	}
	for _, m := range a.Mismatches {
		t.Error(m)
	}
	counts := a.Counts
	counts.Sent = len(sent)
	return counts
}

// ReadStream calls fn for every message of a stream, up to its last sequence when the read
// starts. (Stopping at the first empty fetch is not enough: right after a leader change a
// fetch can come back empty while messages remain.)
func ReadStream(t testing.TB, js jetstream.JetStream, stream string, fn func(jetstream.Msg)) {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 {
		return
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			fn(m)
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			if md.Sequence.Stream >= last {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: could not read up to sequence %d within a minute", stream, last)
		}
	}
}

// FillRecords writes n records straight into the bucket's stream (what kv.Put does, without
// waiting for each ack), with resource IDs from id and states in rotation over domain.States.
// It returns the count per state, indexed as domain.States.
func FillRecords(t testing.TB, js jetstream.JetStream, n int, id func(int) string) []int64 {
	t.Helper()
	ajs, err := jetstream.New(js.Conn(), jetstream.WithPublishAsyncMaxPending(2048))
	if err != nil {
		t.Fatal(err)
	}
	ctx := Context(t, 2*time.Minute)
	now := time.Now()
	counts := make([]int64, len(domain.States))
	for i := 0; i < n; i++ {
		s := domain.States[i%len(domain.States)]
		counts[i%len(domain.States)]++
		b, err := domain.EncodeRecord(domain.Record{
			ResourceID: id(i), State: s, StateSince: now, UpdatedAt: now,
			LastCommandID: fmt.Sprintf("cmd-%d", i), Version: domain.RecordVersion,
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ajs.PublishAsync(domain.RecordSubject(domain.MustKey(id(i))), b); err != nil {
			t.Fatal(err)
		}
		if i%1024 == 1023 {
			select {
			case <-ajs.PublishAsyncComplete():
			case <-ctx.Done():
				t.Fatal("bucket fill timed out")
			}
		}
	}
	select {
	case <-ajs.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("bucket fill timed out")
	}
	return counts
}
