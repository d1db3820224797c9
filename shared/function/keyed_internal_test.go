package function

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// heldMsg is a delivered message as the keyed queues see it; only what they call is real.
type heldMsg struct {
	jetstream.Msg
	subject string
	seq     uint64
	pin     string
}

func (m *heldMsg) Subject() string      { return m.subject }
func (m *heldMsg) Data() []byte         { return nil }
func (m *heldMsg) Headers() nats.Header { return nats.Header{HeaderPinID: []string{m.pin}} }
func (m *heldMsg) Ack() error           { return nil }
func (m *heldMsg) InProgress() error    { return nil }
func (m *heldMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: m.seq}, NumDelivered: 2}, nil
}

// A message that comes back late (a redelivery with a lower sequence) while the head of its
// key waits for a free slot goes first, and every message runs exactly once.
func TestKeyedQueues_LateLowerSequenceGoesFirstAndEachRunsOnce(t *testing.T) {
	var mu sync.Mutex
	var order []uint64
	gate := make(chan struct{})
	k := serverlessKeyed(t, 1, time.Minute, func(_ context.Context, m Message) error {
		if m.Seq == 5 {
			<-gate
		}
		mu.Lock()
		order = append(order, m.Seq)
		mu.Unlock()
		return nil
	})
	add := func(key string, seq uint64) {
		raw := &heldMsg{subject: "t." + key, seq: seq}
		e := k.entry(raw)
		k.mu.Lock()
		defer k.mu.Unlock()
		k.held[seq] = e
		k.admitLocked(e)
	}
	add("y", 5)  // runs, and holds the only slot
	add("x", 20) // heads x, waits for the slot
	add("x", 15) // comes back late
	close(gate)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k.drained(ctx)
	k.wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if want := []uint64{5, 15, 20}; !slices.Equal(order, want) {
		t.Errorf("handled %v, want %v", order, want)
	}
	if len(k.held) != 0 || len(k.queues) != 0 || len(k.ready) != 0 {
		t.Errorf("left behind: %d held, %d queues, %d ready", len(k.held), len(k.queues), len(k.ready))
	}
}

// A message whose lease runs out while its handler works is given up, and the server gives it
// out again only after its ack wait. A newer message of its key that comes meanwhile, under the
// same pin and on the same connection, must wait for it: run first, it would overtake it (and
// the command function would then skip the older command as handled, leaving it without an
// outcome).
func TestKeyed_GivenUpMessageIsNotOvertakenByANewerOneOfItsKey(t *testing.T) {
	var mu sync.Mutex
	var ran []uint64
	k := serverlessKeyed(t, 4, 40*time.Millisecond, func(ctx context.Context, m Message) error {
		mu.Lock()
		ran = append(ran, m.Seq)
		mu.Unlock()
		if m.Seq == 10 {
			// Works past its lease (no keep-alive is answered here), then checks before
			// committing, as the command function does.
			time.Sleep(60 * time.Millisecond)
			return Holding(ctx)
		}
		return nil
	})
	k.pin = "pin-1"
	// checking: the fence's check against the server is not started (there is no server); a
	// fenced message stays fenced, which is what the test looks for.
	k.checking = true
	k.receive(&heldMsg{subject: "t.x", seq: 10, pin: "pin-1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k.drained(ctx) // seq 10 given up: no longer held
	k.receive(&heldMsg{subject: "t.x", seq: 11, pin: "pin-1"})
	time.Sleep(50 * time.Millisecond)
	k.mu.Lock()
	fenced := len(k.fenced)
	k.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(ran, []uint64{10}) || fenced != 1 {
		t.Errorf("after seq 10 was given up, seq 11 of its key: handled %v, fenced %d; want only 10 handled and 11 fenced until 10 is back", ran, fenced)
	}
	close(k.stop)
	k.wg.Wait()
}

// serverlessKeyed is a keyed consumer driven without a server: messages go in through receive
// or admitLocked, handlers run for real, settling does nothing.
func serverlessKeyed(t *testing.T, concurrency int, ackWait time.Duration, h Handler) *keyed {
	t.Helper()
	r := &runner{log: slog.New(slog.DiscardHandler)}
	r.cfg = Config{Name: "f", Stream: "T", Consumers: []string{"p"}, Concurrency: concurrency, MaxDeliver: 10,
		KeyOf:   func(m Message) string { return strings.TrimPrefix(m.Subject, "t.") },
		Handler: h}
	if err := r.cfg.validate(); err != nil {
		t.Fatal(err)
	}
	var err error
	if r.metrics, err = newMetrics(r.cfg.Meters.Meter(MeterScope)); err != nil {
		t.Fatal(err)
	}
	return &keyed{r: r, name: "p", ctx: context.Background(), ackWait: ackWait,
		held: map[uint64]*keyedEntry{}, queues: map[string][]*keyedEntry{}, idle: make(chan struct{}), stop: make(chan struct{})}
}
