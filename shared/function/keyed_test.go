package function_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/function"
	"maintsignals/test/testenv"
)

const pinGroup = "g"

// addPinned creates a consumer pinned to one client at a time, with window messages out.
func (e *env) addPinned(name string, window int, pinnedTTL time.Duration) {
	e.addPinnedOn(name, "t.>", window, pinnedTTL)
}

func (e *env) addPinnedOn(name, filter string, window int, pinnedTTL time.Duration) {
	e.t.Helper()
	_, err := e.js.CreateOrUpdateConsumer(context.Background(), workStream, jetstream.ConsumerConfig{
		Durable:        name,
		FilterSubject:  filter,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        2 * time.Second,
		MaxDeliver:     -1,
		MaxAckPending:  window,
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PriorityGroups: []string{pinGroup},
		PinnedTTL:      pinnedTTL,
	})
	if err != nil {
		e.t.Fatalf("create pinned consumer %s: %v", name, err)
	}
}

// keyedConfig serves consumer by key: the second token of the subject (t.<key>.<n>).
func keyedConfig(consumer string, concurrency int, h function.Handler) function.Config {
	cfg := config(consumer, h)
	cfg.Concurrency = concurrency
	cfg.KeyOf = func(m function.Message) string { return strings.Split(m.Subject, ".")[1] }
	return cfg
}

// order records the data of handled messages per key, and how many ran at once.
type order struct {
	mu      sync.Mutex
	byKey   map[string][]string
	running int
	most    int
}

func newOrder() *order { return &order{byKey: map[string][]string{}} }

func (o *order) enter() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.running++
	o.most = max(o.most, o.running)
}

func (o *order) leave(m function.Message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.running--
	key := strings.Split(m.Subject, ".")[1]
	o.byKey[key] = append(o.byKey[key], string(m.Data))
}

func (o *order) of(key string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.byKey[key]...)
}

func (o *order) total() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, v := range o.byKey {
		n += len(v)
	}
	return n
}

func numbered(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(i)
	}
	return out
}

func TestKeyed_KeysRunConcurrentlyAndEachKeyInStreamOrder(t *testing.T) {
	e := newEnv(t)
	e.addPinned("p", 64, 10*time.Second)
	const keys, per = 4, 30
	for i := 0; i < per; i++ {
		for k := 0; k < keys; k++ {
			e.publish(fmt.Sprintf("t.k%d.%d", k, i), fmt.Sprint(i), nil)
		}
	}
	o := newOrder()
	e.start(keyedConfig("p", 8, func(_ context.Context, m function.Message) error {
		o.enter()
		time.Sleep(2 * time.Millisecond) // long enough for the keys to overlap
		o.leave(m)
		return nil
	}))
	testenv.Eventually(t, 20*time.Second, "every message handled and acked", func() bool { return o.total() == keys*per && e.settled("p")() })
	for k := 0; k < keys; k++ {
		if got, want := o.of(fmt.Sprintf("k%d", k)), numbered(per); !slices.Equal(got, want) {
			t.Errorf("key k%d handled in order %v, want %v", k, got, want)
		}
	}
	if o.most < 2 {
		t.Errorf("at most %d message ran at once; different keys should run concurrently", o.most)
	}
	if o.most > 8 {
		t.Errorf("%d messages ran at once, above the concurrency of 8", o.most)
	}
}

func TestKeyed_FailureIsRetriedInPlaceAndHoldsBackOnlyItsKey(t *testing.T) {
	e := newEnv(t)
	e.addPinned("p", 64, 10*time.Second)
	var failed atomic.Bool
	var mu sync.Mutex
	var log []string
	e.start(keyedConfig("p", 4, func(_ context.Context, m function.Message) error {
		if m.Subject == "t.a.0" && !failed.Swap(true) {
			return errors.New("record store unavailable")
		}
		mu.Lock()
		log = append(log, fmt.Sprintf("%s#%d", m.Subject, m.Delivered))
		mu.Unlock()
		return nil
	}))
	e.publish("t.a.0", "a0", nil)
	e.publish("t.a.1", "a1", nil)
	e.publish("t.b.0", "b0", nil)
	testenv.Eventually(t, 20*time.Second, "all three handled and acked", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(log) == 3 && e.settled("p")()
	})
	idx := func(s string) int { return slices.Index(log, s) }
	if idx("t.a.0#2") < 0 {
		t.Fatalf("t.a.0 was not retried as its second attempt: %v", log)
	}
	if idx("t.a.1#1") < idx("t.a.0#2") {
		t.Errorf("t.a.1 ran before the retry of t.a.0 succeeded: %v", log)
	}
	if idx("t.b.0#1") > idx("t.a.0#2") {
		t.Errorf("t.b.0 waited for the retry of another key: %v", log)
	}
}

func TestKeyed_PoisonMessageIsDeadLetteredAndItsKeyMovesOn(t *testing.T) {
	e := newEnv(t)
	e.addPinned("p", 64, 10*time.Second)
	var mu sync.Mutex
	var handled []string
	e.start(keyedConfig("p", 4, func(_ context.Context, m function.Message) error {
		if string(m.Data) == "poison" {
			return errors.New("always fails")
		}
		mu.Lock()
		handled = append(handled, m.Subject)
		mu.Unlock()
		return nil
	}))
	e.publish("t.a.0", "poison", nil)
	e.publish("t.a.1", "fine", nil)
	testenv.Eventually(t, 20*time.Second, "the message behind the poison handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == 1 && e.settled("p")()
	})
	dl := e.deadLetters()
	if len(dl) != 1 || dl[0].Subject != "dlq.t.a.0" {
		t.Fatalf("dead letters %v, want the poison message once", dl)
	}
	if got := dl[0].Header.Get(function.HeaderDLQDeliveries); got != fmt.Sprint(budget) {
		t.Errorf("dead-lettered after %s attempts, want the budget of %d", got, budget)
	}
}

func TestKeyed_ConsumerNotPinnedIsRefused(t *testing.T) {
	e := newEnv(t)
	e.addConsumer("plain", "t.>", time.Second)
	err := function.Run(context.Background(), e.js, keyedConfig("plain", 4, func(context.Context, function.Message) error { return nil }))
	if !errors.Is(err, function.ErrNotPinned) {
		t.Fatalf("Run on an unpinned consumer: %v, want ErrNotPinned", err)
	}
}

// A replica that takes over a partition while the previous holder is still busy with a
// message of a key must not run a later message of that key first.
func TestKeyed_NewPinWaitsForThePreviousHoldersMessages(t *testing.T) {
	e := newEnv(t)
	e.addPinned("p", 64, 30*time.Second)
	release := make(chan struct{})
	var mu sync.Mutex
	var log []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		log = append(log, s)
	}
	a := e.start(keyedConfig("p", 4, func(_ context.Context, m function.Message) error {
		if m.Subject == "t.a.0" {
			note("A starts a0")
			<-release
			note("A ends a0")
		}
		return nil
	}))
	e.publish("t.a.0", "a0", nil)
	testenv.Eventually(t, 10*time.Second, "A busy with a0", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(log) == 1
	})
	e.start(keyedConfig("p", 4, func(_ context.Context, m function.Message) error {
		note("B handles " + m.Subject)
		return nil
	}))
	time.Sleep(200 * time.Millisecond) // B's pull is waiting behind A's pin
	// Move the pin away from A while it still holds a0: the next messages go to B.
	st, err := e.js.Stream(context.Background(), workStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.UnpinConsumer(context.Background(), "p", pinGroup); err != nil {
		t.Fatalf("unpin: %v", err)
	}
	e.publish("t.a.1", "a1", nil)
	e.publish("t.b.0", "b0", nil)
	testenv.Eventually(t, 10*time.Second, "a1 and b0 delivered while A holds a0", func() bool { return e.consumerInfo("p").NumAckPending == 3 })
	time.Sleep(300 * time.Millisecond) // B had its chance to run them early
	note("released")
	close(release)
	testenv.Eventually(t, 20*time.Second, "everything settled", e.settled("p"))
	_ = a.stop(t)
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"B handles t.a.1", "B handles t.b.0"} {
		if !slices.Contains(log, want) {
			t.Fatalf("%q missing: the pin did not move to B: %v", want, log)
		}
	}
	if end, b := slices.Index(log, "A ends a0"), slices.Index(log, "B handles t.a.1"); b < end {
		t.Errorf("B ran a1 while A still held a0: %v", log)
	}
	if rel, b := slices.Index(log, "released"), slices.Index(log, "B handles t.b.0"); b < rel {
		t.Errorf("B ran messages under its new pin before the previous holder settled: %v", log)
	}
}

func TestKeyed_StoppingReplicaHandsItsPinOverAtOnce(t *testing.T) {
	e := newEnv(t)
	// A pinned TTL far beyond the test: only the hand-over can move the pin in time.
	e.addPinned("p", 64, 5*time.Minute)
	var byA, byB atomic.Int64
	a := e.start(keyedConfig("p", 4, func(context.Context, function.Message) error { byA.Add(1); return nil }))
	e.publish("t.a.0", "x", nil)
	testenv.Eventually(t, 10*time.Second, "A handles the first message", func() bool { return byA.Load() == 1 })
	e.start(keyedConfig("p", 4, func(context.Context, function.Message) error { byB.Add(1); return nil }))
	time.Sleep(200 * time.Millisecond) // B's pull is waiting behind A's pin
	if err := a.stop(t); err != nil {
		t.Fatalf("stop A: %v", err)
	}
	e.publish("t.a.1", "y", nil)
	testenv.Eventually(t, 30*time.Second, "B handles the next message", func() bool { return byB.Load() == 1 })
	if byA.Load() != 1 {
		t.Errorf("A handled %d messages, want 1", byA.Load())
	}
}

func TestKeyed_ReplicasShareThePartitions(t *testing.T) {
	e := newEnv(t)
	var names []string
	for p := 0; p < 4; p++ {
		names = append(names, fmt.Sprintf("p%d", p))
		e.addPinnedOn(names[p], fmt.Sprintf("t.%d.*", p), 16, 10*time.Second)
	}
	cfg := func(n *atomic.Int64) function.Config {
		c := keyedConfig(names[0], 4, func(context.Context, function.Message) error { n.Add(1); return nil })
		c.Consumers = names
		c.BalanceEvery = 100 * time.Millisecond
		return c
	}
	publishRound := func() {
		for p := range names {
			e.publish(fmt.Sprintf("t.%d.k", p), "x", nil)
		}
	}
	var byA, byB atomic.Int64
	e.start(cfg(&byA))
	publishRound()
	testenv.Eventually(t, 10*time.Second, "A, alone, serves every partition", func() bool { return byA.Load() == 4 })
	e.start(cfg(&byB))
	testenv.Eventually(t, 30*time.Second, "both replicas serve a round of messages", func() bool {
		a, b := byA.Load(), byB.Load()
		publishRound()
		time.Sleep(300 * time.Millisecond)
		return byA.Load() > a && byB.Load() > b
	})
}

// The pin moves back and forth while both replicas hold messages behind a fence: the one that
// lost the pin gives its messages back instead of both waiting for each other.
func TestKeyed_ReplicaThatLostThePinGivesFencedMessagesBack(t *testing.T) {
	e := newEnv(t)
	// A short pinned TTL makes pulls short: B renews its pull with the pin it holds, so the
	// second hand-over goes to A.
	e.addPinned("p", 64, 2500*time.Millisecond)
	release := make(chan struct{})
	var handled atomic.Int64
	var mu sync.Mutex
	var log []string
	cfg := func(name string) function.Config {
		c := keyedConfig("p", 4, func(_ context.Context, m function.Message) error {
			if m.Subject == "t.a.0" {
				<-release
			}
			mu.Lock()
			log = append(log, name+" "+m.Subject)
			mu.Unlock()
			handled.Add(1)
			return nil
		})
		c.BalanceEvery = -1
		return c
	}
	e.start(cfg("A"))
	e.publish("t.a.0", "a0", nil)
	testenv.Eventually(t, 10*time.Second, "a0 in hand", func() bool { return e.consumerInfo("p").NumAckPending == 1 })
	e.start(cfg("B"))
	time.Sleep(200 * time.Millisecond) // the second replica's pull waits behind the pin
	st, err := e.js.Stream(context.Background(), workStream)
	if err != nil {
		t.Fatal(err)
	}
	unpin := func() {
		if err := st.UnpinConsumer(context.Background(), "p", pinGroup); err != nil {
			t.Fatalf("unpin: %v", err)
		}
	}
	unpin()
	e.publish("t.a.1", "a1", nil)
	e.publish("t.b.0", "b0", nil)
	testenv.Eventually(t, 10*time.Second, "a1 and b0 delivered", func() bool { return e.consumerInfo("p").NumAckPending == 3 })
	time.Sleep(1500 * time.Millisecond) // B's next pull carries its pin
	unpin()
	e.publish("t.c.0", "c0", nil)
	testenv.Eventually(t, 10*time.Second, "c0 delivered", func() bool { return e.consumerInfo("p").NumAckPending == 4 })
	time.Sleep(300 * time.Millisecond)
	close(release)
	testenv.Eventually(t, 20*time.Second, "every message handled and acked", func() bool { return handled.Load() >= 4 && e.settled("p")() })
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(log, "A t.c.0") {
		t.Fatalf("the pin did not move back to A (%v): the scenario did not happen", log)
	}
	if slices.Index(log, "A t.a.1") < slices.Index(log, "A t.a.0") {
		t.Errorf("a1 ran before a0: %v", log)
	}
}

func TestKeyed_UnknownConsumerFailsRunAfterClosingTheOthers(t *testing.T) {
	e := newEnv(t)
	e.addPinned("p", 64, 10*time.Second)
	for i := 0; i < 50; i++ {
		e.publish(fmt.Sprintf("t.k%d.0", i%5), "x", nil)
	}
	cfg := keyedConfig("p", 4, func(context.Context, function.Message) error { return nil })
	cfg.Consumers = []string{"p", "missing"}
	err := function.Run(context.Background(), e.js, cfg)
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Run with a missing consumer: %v, want an error naming it", err)
	}
}

// A handled message's context ends with it: one left running would stay among the children
// of the replica's context for good (the soak saw the command function grow by a kilobyte per
// command).
func TestKeyed_HandlerContextEndsOnceTheMessageIsSettled(t *testing.T) {
	e := newEnv(t)
	e.addPinned("p", 64, 10*time.Second)
	const n = 20
	for i := range n {
		e.publish(fmt.Sprintf("t.k%d.%d", i%3, i), fmt.Sprint(i), nil)
	}
	var mu sync.Mutex
	var ctxs []context.Context
	e.start(keyedConfig("p", 4, func(ctx context.Context, _ function.Message) error {
		mu.Lock()
		defer mu.Unlock()
		ctxs = append(ctxs, ctx)
		return nil
	}))
	testenv.Eventually(t, 20*time.Second, "every message handled and acked", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ctxs) == n && e.settled("p")()
	})
	mu.Lock()
	defer mu.Unlock()
	for i, ctx := range ctxs {
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("the context of handled message %d has not ended", i)
		}
	}
}
