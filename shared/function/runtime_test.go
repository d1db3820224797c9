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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"maintsignals/shared/embedded"
	"maintsignals/shared/function"
	"maintsignals/test/testenv"
)

// Every test runs against its own embedded nats-server: a work stream "T" on t.> and a
// dead-letter stream "DLQ" on dlq.>.
const (
	workStream = "T"
	dlqStream  = "DLQ"
	// budget is the runtime's delivery budget; consumers allow one delivery more.
	budget = 3
)

var quiet = testenv.Quiet()

type env struct {
	t  *testing.T
	nc *nats.Conn
	js jetstream.JetStream
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s := testenv.Server(t, embedded.Config{StoreDir: t.TempDir()})
	nc, err := s.Connect()
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	ctx := context.Background()
	for name, subj := range map[string]string{workStream: "t.>", dlqStream: "dlq.>"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subj}}); err != nil {
			t.Fatalf("create stream %s: %v", name, err)
		}
	}
	return &env{t: t, nc: nc, js: js}
}

// addConsumer creates a durable explicit-ack consumer on the work stream.
func (e *env) addConsumer(name, filter string, ackWait time.Duration) {
	e.t.Helper()
	_, err := e.js.CreateOrUpdateConsumer(context.Background(), workStream, jetstream.ConsumerConfig{
		Durable:       name,
		FilterSubject: filter,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxDeliver:    budget + 1,
	})
	if err != nil {
		e.t.Fatalf("create consumer %s: %v", name, err)
	}
}

func (e *env) publish(subject, data string, hdr nats.Header) {
	e.t.Helper()
	if _, err := e.js.PublishMsg(context.Background(), &nats.Msg{Subject: subject, Data: []byte(data), Header: hdr}); err != nil {
		e.t.Fatalf("publish %s: %v", subject, err)
	}
}

func (e *env) consumerInfo(name string) *jetstream.ConsumerInfo {
	e.t.Helper()
	c, err := e.js.Consumer(context.Background(), workStream, name)
	if err != nil {
		e.t.Fatalf("consumer %s: %v", name, err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		e.t.Fatalf("consumer info %s: %v", name, err)
	}
	return info
}

// settled reports whether the consumer has nothing pending and nothing unacknowledged.
func (e *env) settled(name string) func() bool {
	return func() bool {
		info := e.consumerInfo(name)
		return info.NumAckPending == 0 && info.NumPending == 0
	}
}

// deadLetters returns every message in the dead-letter stream.
func (e *env) deadLetters() []*jetstream.RawStreamMsg {
	e.t.Helper()
	ctx := context.Background()
	st, err := e.js.Stream(ctx, dlqStream)
	if err != nil {
		e.t.Fatalf("dlq stream: %v", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		e.t.Fatalf("dlq stream info: %v", err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			e.t.Fatalf("dlq get %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

// config is a runtime config for one consumer with short backoffs and dead letters to
// dlq.<original subject>.
func config(consumer string, h function.Handler) function.Config {
	return function.Config{
		Name:              "test-fn",
		Stream:            workStream,
		Consumers:         []string{consumer},
		Handler:           h,
		MaxDeliver:        budget,
		Backoff:           []time.Duration{50 * time.Millisecond},
		DeadLetterSubject: func(m function.Message) string { return "dlq." + m.Subject },
		DrainTimeout:      10 * time.Second,
		Logger:            quiet,
	}
}

// running is one function.Run in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// start runs cfg until the returned run is stopped (at the latest when the test ends).
func (e *env) start(cfg function.Config) *running {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- function.Run(ctx, e.js, cfg) }()
	e.t.Cleanup(func() { _ = r.stop(e.t) })
	return r
}

// stop cancels the run and waits for Run to return its result.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.done:
		case <-time.After(20 * time.Second):
			r.err = errors.New("Run did not return within 20s of cancel")
		}
	})
	return r.err
}

// call is one handler invocation.
type call struct {
	Data      string
	Subject   string
	Seq       uint64
	Delivered uint64
	Consumer  string
	At        time.Time
}

type recorder struct {
	mu    sync.Mutex
	calls []call
}

func (r *recorder) add(m function.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call{Data: string(m.Data), Subject: m.Subject, Seq: m.Seq, Delivered: m.Delivered, Consumer: m.Consumer, At: time.Now()})
}

func (r *recorder) of(data string) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []call
	for _, c := range r.calls {
		if c.Data == data {
			out = append(out, c)
		}
	}
	return out
}

func (r *recorder) deliveries(data string) []uint64 {
	var out []uint64
	for _, c := range r.of(data) {
		out = append(out, c.Delivered)
	}
	return out
}

func (r *recorder) count(data string) int { return len(r.of(data)) }

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// hookCall is one OnDeadLetter invocation.
type hookCall struct {
	Seq    uint64
	Reason string
}

type hookRecorder struct {
	mu    sync.Mutex
	calls []hookCall
	fail  int // fail this many calls first
}

func (h *hookRecorder) hook(_ context.Context, m function.Message, reason string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, hookCall{Seq: m.Seq, Reason: reason})
	if len(h.calls) <= h.fail {
		return errors.New("outcome store unavailable")
	}
	return nil
}

func (h *hookRecorder) snapshot() []hookCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

func TestRun_HandlerReturningNilAcksEachMessageOnce(t *testing.T) {
	e := newEnv(t)
	e.addConsumer("acker", "t.ack.>", 2*time.Second)
	var rec recorder
	e.start(config("acker", func(_ context.Context, m function.Message) error {
		rec.add(m)
		return nil
	}))

	const n = 5
	for i := range n {
		e.publish(fmt.Sprintf("t.ack.%d", i), fmt.Sprintf("m-%d", i), nil)
	}
	testenv.Eventually(t, 5*time.Second, "all messages handled", func() bool { return rec.total() == n })
	testenv.Eventually(t, 5*time.Second, "consumer settled", e.settled("acker"))

	for i := range n {
		if got := rec.deliveries(fmt.Sprintf("m-%d", i)); !slices.Equal(got, []uint64{1}) {
			t.Errorf("m-%d deliveries = %v, want [1]", i, got)
		}
	}
	if rec.total() != n {
		t.Errorf("handler ran %d times, want %d", rec.total(), n)
	}
	if dl := e.deadLetters(); len(dl) != 0 {
		t.Errorf("dead letters = %d, want 0", len(dl))
	}
}

func TestRun_PlainErrorRetriesWithBackoffUntilTheCauseGoesAway(t *testing.T) {
	e := newEnv(t)
	e.addConsumer("retrier", "t.retry.>", 2*time.Second)
	var rec recorder
	cfg := config("retrier", func(_ context.Context, m function.Message) error {
		rec.add(m)
		if m.Delivered < 3 {
			return errors.New("store unavailable")
		}
		return nil
	})
	cfg.Backoff = []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}
	e.start(cfg)

	e.publish("t.retry.1", "flaky", nil)
	testenv.Eventually(t, 5*time.Second, "third delivery", func() bool { return rec.count("flaky") >= 3 })
	testenv.Eventually(t, 5*time.Second, "consumer settled", e.settled("retrier"))

	calls := rec.of("flaky")
	if got := rec.deliveries("flaky"); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("deliveries = %v, want [1 2 3]", got)
	}
	// The nak delay is applied by the server, after the handler returned.
	for i, want := range cfg.Backoff {
		if gap := calls[i+1].At.Sub(calls[i].At); gap < want-10*time.Millisecond {
			t.Errorf("retry %d came after %s, want at least the backoff %s", i+1, gap, want)
		}
	}
	if dl := e.deadLetters(); len(dl) != 0 {
		t.Errorf("dead letters = %d, want 0", len(dl))
	}
}

func TestRun_RetriesExhaustedDeadLettersACopyAndMovesOn(t *testing.T) {
	e := newEnv(t)
	e.addConsumer("exhaust", "t.ex.>", 2*time.Second)
	var rec recorder
	hooks := &hookRecorder{}
	cfg := config("exhaust", func(_ context.Context, m function.Message) error {
		rec.add(m)
		if string(m.Data) == "poison" {
			return errors.New("cannot parse")
		}
		return nil
	})
	cfg.OnDeadLetter = hooks.hook
	e.start(cfg)

	e.publish("t.ex.poison", "poison", nats.Header{"X-Trace": []string{"trace-1"}})
	testenv.Eventually(t, 5*time.Second, "poison dead-lettered", func() bool { return len(e.deadLetters()) == 1 })
	e.publish("t.ex.ok", "ok", nil)
	testenv.Eventually(t, 5*time.Second, "next message handled", func() bool { return rec.count("ok") == 1 })
	testenv.Eventually(t, 5*time.Second, "consumer settled (poison terminated)", e.settled("exhaust"))

	if got := rec.deliveries("poison"); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Errorf("poison deliveries = %v, want [1 2 3]", got)
	}
	if got := rec.deliveries("ok"); !slices.Equal(got, []uint64{1}) {
		t.Errorf("ok deliveries = %v, want [1]", got)
	}

	dl := e.deadLetters()
	if len(dl) != 1 {
		t.Fatalf("dead letters = %d, want 1", len(dl))
	}
	d := dl[0]
	reason := d.Header.Get(function.HeaderDLQReason)
	checks := []struct{ what, got, want string }{
		{"subject", d.Subject, "dlq.t.ex.poison"},
		{"body", string(d.Data), "poison"},
		{"original header X-Trace", d.Header.Get("X-Trace"), "trace-1"},
		{function.HeaderDLQStream, d.Header.Get(function.HeaderDLQStream), workStream},
		{function.HeaderDLQSeq, d.Header.Get(function.HeaderDLQSeq), "1"},
		{function.HeaderDLQSubject, d.Header.Get(function.HeaderDLQSubject), "t.ex.poison"},
		{function.HeaderDLQDeliveries, d.Header.Get(function.HeaderDLQDeliveries), "3"},
		{nats.MsgIdHdr, d.Header.Get(nats.MsgIdHdr), "dlq-T-1"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("dead letter %s = %q, want %q", c.what, c.got, c.want)
		}
	}
	if !strings.Contains(reason, "gave up after 3 deliveries") || !strings.Contains(reason, "cannot parse") {
		t.Errorf("dead letter reason = %q, want the delivery count and the handler error", reason)
	}
	if _, err := time.Parse(time.RFC3339Nano, d.Header.Get(function.HeaderDLQAt)); err != nil {
		t.Errorf("dead letter %s = %q: %v", function.HeaderDLQAt, d.Header.Get(function.HeaderDLQAt), err)
	}

	if got := hooks.snapshot(); len(got) != 1 || got[0].Reason != reason || got[0].Seq != 1 {
		t.Errorf("OnDeadLetter calls = %+v, want one for seq 1 with reason %q", got, reason)
	}
}

func TestRun_PoisonMessageIsDeadLetteredOnFirstDelivery(t *testing.T) {
	tests := []struct {
		name       string
		handle     func() error
		wantReason string
	}{
		{
			name:       "permanent error",
			handle:     func() error { return function.Permanent(errors.New("bad payload")) },
			wantReason: "bad payload",
		},
		{
			name:       "handler panic does not crash the process",
			handle:     func() error { panic("boom") },
			wantReason: "panic",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.addConsumer("poison", "t.p.>", 2*time.Second)
			var rec recorder
			hooks := &hookRecorder{}
			cfg := config("poison", func(_ context.Context, m function.Message) error {
				rec.add(m)
				if string(m.Data) == "bad" {
					return tt.handle()
				}
				return nil
			})
			cfg.OnDeadLetter = hooks.hook
			run := e.start(cfg)

			e.publish("t.p.bad", "bad", nil)
			e.publish("t.p.good", "good", nil)
			testenv.Eventually(t, 5*time.Second, "good handled", func() bool { return rec.count("good") == 1 })
			testenv.Eventually(t, 5*time.Second, "bad dead-lettered", func() bool { return len(e.deadLetters()) == 1 })
			testenv.Eventually(t, 5*time.Second, "consumer settled", e.settled("poison"))

			if got := rec.deliveries("bad"); !slices.Equal(got, []uint64{1}) {
				t.Errorf("bad deliveries = %v, want [1]", got)
			}
			d := e.deadLetters()[0]
			reason := d.Header.Get(function.HeaderDLQReason)
			if !strings.Contains(reason, tt.wantReason) {
				t.Errorf("dead letter reason = %q, want it to contain %q", reason, tt.wantReason)
			}
			if got := d.Header.Get(function.HeaderDLQDeliveries); got != "1" {
				t.Errorf("dead letter deliveries = %q, want 1", got)
			}
			if got := hooks.snapshot(); len(got) != 1 || got[0].Reason != reason {
				t.Errorf("OnDeadLetter calls = %+v, want one with reason %q", got, reason)
			}

			// The runtime keeps serving after the poison message.
			e.publish("t.p.later", "later", nil)
			testenv.Eventually(t, 5*time.Second, "later message handled", func() bool { return rec.count("later") == 1 })
			if err := run.stop(t); err != nil {
				t.Errorf("Run = %v, want nil", err)
			}
		})
	}
}

func TestRun_FailedDeadLetterIsRetriedNotLost(t *testing.T) {
	tests := []struct {
		name        string
		dlqSubject  func(function.Message) string
		hookFails   int
		wantHooks   int // OnDeadLetter calls once the message is settled (0: it never settles here)
		wantCopies  int
		waitSettled bool
	}{
		{
			// No stream captures "nowhere.>": the copy fails with no responders.
			name:       "dead-letter copy fails",
			dlqSubject: func(m function.Message) string { return "nowhere." + m.Subject },
		},
		{
			// The copy succeeds both times, but Nats-Msg-Id keeps it to one.
			name:        "dead-letter hook fails once",
			dlqSubject:  func(m function.Message) string { return "dlq." + m.Subject },
			hookFails:   1,
			wantHooks:   2,
			wantCopies:  1,
			waitSettled: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.addConsumer("dlqfail", "t.df.>", 2*time.Second)
			var rec recorder
			hooks := &hookRecorder{fail: tt.hookFails}
			cfg := config("dlqfail", func(_ context.Context, m function.Message) error {
				rec.add(m)
				return function.Permanent(errors.New("bad payload"))
			})
			cfg.DeadLetterSubject = tt.dlqSubject
			cfg.OnDeadLetter = hooks.hook
			e.start(cfg)

			e.publish("t.df.1", "bad", nil)
			testenv.Eventually(t, 10*time.Second, "the message delivered again", func() bool { return rec.count("bad") >= 2 })
			if got := rec.deliveries("bad")[:2]; !slices.Equal(got, []uint64{1, 2}) {
				t.Errorf("deliveries = %v, want [1 2 ...]", got)
			}
			if tt.waitSettled {
				testenv.Eventually(t, 5*time.Second, "consumer settled", e.settled("dlqfail"))
				if got := rec.deliveries("bad"); !slices.Equal(got, []uint64{1, 2}) {
					t.Errorf("deliveries = %v, want [1 2]", got)
				}
			}
			if got := len(hooks.snapshot()); tt.waitSettled && got != tt.wantHooks || !tt.waitSettled && got != 0 {
				t.Errorf("OnDeadLetter calls = %d, want %d", got, tt.wantHooks)
			}
			if got := len(e.deadLetters()); got != tt.wantCopies {
				t.Errorf("dead-letter copies = %d, want %d", got, tt.wantCopies)
			}
		})
	}
}

func TestRun_SlowHandlerIsKeptAliveAndNotRedelivered(t *testing.T) {
	const ackWait = time.Second
	tests := []struct {
		name        string
		messages    int
		hold        time.Duration
		concurrency int
	}{
		{name: "one message held three ack waits", messages: 1, hold: 3 * ackWait},
		// With Concurrency 1, the second message waits in the runtime's queue and the third
		// in the consume callback while the first one runs: they must not go stale either.
		{name: "messages queued behind a slow handler", messages: 3, hold: ackWait * 3 / 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.addConsumer("slow", "t.slow.>", ackWait)
			var rec recorder
			cfg := config("slow", func(ctx context.Context, m function.Message) error {
				rec.add(m)
				select {
				case <-time.After(tt.hold):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			cfg.Concurrency = tt.concurrency
			e.start(cfg)
			for i := range tt.messages {
				e.publish(fmt.Sprintf("t.slow.%d", i), fmt.Sprintf("s-%d", i), nil)
			}
			within := time.Duration(tt.messages)*tt.hold + 5*time.Second
			testenv.Eventually(t, within, "consumer settled", func() bool {
				return rec.total() >= tt.messages && e.settled("slow")()
			})
			for i := range tt.messages {
				if got := rec.deliveries(fmt.Sprintf("s-%d", i)); !slices.Equal(got, []uint64{1}) {
					t.Errorf("s-%d deliveries = %v, want [1] (one run, never redelivered)", i, got)
				}
			}
		})
	}
}

func TestRun_SlowHandlerDoesNotBlockOtherWorkers(t *testing.T) {
	e := newEnv(t)
	e.addConsumer("par", "t.par.>", 2*time.Second)
	var inFlight, maxInFlight atomic.Int32
	release := make(chan struct{})
	var rec recorder
	cfg := config("par", func(ctx context.Context, m function.Message) error {
		rec.add(m)
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			cur := maxInFlight.Load()
			if n <= cur || maxInFlight.CompareAndSwap(cur, n) {
				break
			}
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	cfg.Concurrency = 2
	e.start(cfg)

	e.publish("t.par.1", "a", nil)
	e.publish("t.par.2", "b", nil)
	testenv.Eventually(t, 5*time.Second, "two handlers running at once", func() bool { return maxInFlight.Load() == 2 })
	close(release)
	testenv.Eventually(t, 5*time.Second, "consumer settled", e.settled("par"))
	if rec.total() != 2 {
		t.Errorf("handler ran %d times, want 2", rec.total())
	}
}

func TestRun_DrainLetsInFlightHandlerFinishAndAck(t *testing.T) {
	e := newEnv(t)
	e.addConsumer("drain", "t.drain.>", 2*time.Second)
	started := make(chan struct{}, 1)
	var finished atomic.Bool
	var first recorder
	run := e.start(config("drain", func(ctx context.Context, m function.Message) error {
		first.add(m)
		started <- struct{}{}
		time.Sleep(500 * time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		finished.Store(true)
		return nil
	}))

	e.publish("t.drain.1", "inflight", nil)
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("handler did not start")
	}
	if err := run.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if !finished.Load() {
		t.Fatal("Run returned before the in-flight handler finished")
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	testenv.Eventually(t, 2*time.Second, "consumer settled after drain", e.settled("drain"))

	// A new run does not see the drained message again.
	var second recorder
	e.start(config("drain", func(_ context.Context, m function.Message) error {
		second.add(m)
		return nil
	}))
	e.publish("t.drain.2", "marker", nil)
	testenv.Eventually(t, 5*time.Second, "marker handled by the new run", func() bool { return second.count("marker") == 1 })
	if got := second.count("inflight"); got != 0 {
		t.Errorf("drained message handled %d more times by the next run, want 0", got)
	}
	if got := first.deliveries("inflight"); !slices.Equal(got, []uint64{1}) {
		t.Errorf("first run deliveries = %v, want [1]", got)
	}
}

func TestRun_DrainTimeoutCancelsAStuckHandlerAndReturns(t *testing.T) {
	e := newEnv(t)
	e.addConsumer("stuck", "t.stuck.>", 2*time.Second)
	started := make(chan struct{}, 1)
	handlerErr := make(chan error, 1)
	cfg := config("stuck", func(ctx context.Context, _ function.Message) error {
		started <- struct{}{}
		<-ctx.Done()
		handlerErr <- ctx.Err()
		return ctx.Err()
	})
	cfg.DrainTimeout = 300 * time.Millisecond
	run := e.start(cfg)

	e.publish("t.stuck.1", "stuck", nil)
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("handler did not start")
	}
	t0 := time.Now()
	if err := run.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if took := time.Since(t0); took < cfg.DrainTimeout || took > 5*time.Second {
		t.Errorf("Run returned %s after cancel, want about the drain timeout %s", took, cfg.DrainTimeout)
	}
	select {
	case err := <-handlerErr:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("handler ctx error = %v, want context.Canceled", err)
		}
	default:
		t.Fatal("handler ctx was not cancelled")
	}

	// The abandoned message comes back to the next run.
	var rec recorder
	e.start(config("stuck", func(_ context.Context, m function.Message) error {
		rec.add(m)
		return nil
	}))
	testenv.Eventually(t, 5*time.Second, "abandoned message redelivered", func() bool { return rec.count("stuck") == 1 })
	if got := rec.deliveries("stuck"); !slices.Equal(got, []uint64{2}) {
		t.Errorf("redelivery = %v, want [2]", got)
	}
}

// With two consumers, each with a message in its handler, one in the runtime's queue and
// one waiting in the consume callback, a drain must hand every message to a handler and not
// crash (a send on a closed queue would panic the process).
func TestRun_DrainWithBackloggedConsumersHandlesEverythingInHand(t *testing.T) {
	e := newEnv(t)
	e.addConsumer("fast", "t.fast.>", 5*time.Second)
	e.addConsumer("slowc", "t.slowc.>", 5*time.Second)
	var rec recorder
	cfg := config("fast", func(ctx context.Context, m function.Message) error {
		rec.add(m)
		hold := 100 * time.Millisecond
		if m.Consumer == "slowc" {
			hold = 600 * time.Millisecond
		}
		time.Sleep(hold)
		return nil
	})
	cfg.Consumers = []string{"fast", "slowc"}
	run := e.start(cfg)

	for i := range 3 {
		e.publish(fmt.Sprintf("t.fast.%d", i), fmt.Sprintf("f-%d", i), nil)
		e.publish(fmt.Sprintf("t.slowc.%d", i), fmt.Sprintf("s-%d", i), nil)
	}
	// All three messages of each consumer are in the runtime's hands, and each consumer's
	// worker is busy with its first (the server counting a message out does not mean the client
	// has read it yet).
	testenv.Eventually(t, 5*time.Second, "three messages delivered to each consumer", func() bool {
		return e.consumerInfo("fast").NumAckPending == 3 && e.consumerInfo("slowc").NumAckPending == 3 &&
			rec.count("f-0") == 1 && rec.count("s-0") == 1
	})
	if err := run.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	for i := range 3 {
		for _, d := range []string{fmt.Sprintf("f-%d", i), fmt.Sprintf("s-%d", i)} {
			if got := rec.count(d); got != 1 {
				t.Errorf("%s handled %d times during drain, want 1", d, got)
			}
		}
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	testenv.Eventually(t, 2*time.Second, "both consumers settled", func() bool { return e.settled("fast")() && e.settled("slowc")() })
}

func TestRun_InvalidConfig(t *testing.T) {
	e := newEnv(t)
	e.addConsumer("valid", "t.v.>", time.Second)
	ok := func(context.Context, function.Message) error { return nil }
	tests := []struct {
		name   string
		mutate func(*function.Config)
	}{
		{"missing name", func(c *function.Config) { c.Name = "" }},
		{"missing stream", func(c *function.Config) { c.Stream = "" }},
		{"missing consumers", func(c *function.Config) { c.Consumers = nil }},
		{"missing handler", func(c *function.Config) { c.Handler = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config("valid", ok)
			tt.mutate(&cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := function.Run(ctx, e.js, cfg)
			if !errors.Is(err, function.ErrInvalidConfig) {
				t.Fatalf("Run = %v, want an error wrapping ErrInvalidConfig", err)
			}
		})
	}
}

// A consumer that does not exist fails Run, even while the consumers started before it are
// already busy: their consume callbacks may be waiting on a full queue when Run gives up, and
// closing that queue under them would panic the process.
func TestRun_UnknownConsumerFailsRunWithoutCrashingBusyConsumers(t *testing.T) {
	e := newEnv(t)
	var names []string
	for i := range 12 {
		name := fmt.Sprintf("busy%d", i)
		e.addConsumer(name, fmt.Sprintf("t.busy%d.>", i), 5*time.Second)
		names = append(names, name)
		for j := range 4 {
			e.publish(fmt.Sprintf("t.busy%d.%d", i, j), "x", nil)
		}
	}
	var running atomic.Int32
	cfg := config("busy0", func(ctx context.Context, _ function.Message) error {
		running.Add(1)
		defer running.Add(-1)
		select {
		case <-time.After(300 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	cfg.Consumers = append(names, "missing")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := function.Run(ctx, e.js, cfg)
	if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("Run = %v, want an error wrapping jetstream.ErrConsumerNotFound", err)
	}
	if errors.Is(err, function.ErrInvalidConfig) {
		t.Errorf("Run = %v: a missing consumer is not a config validation error", err)
	}
	if n := running.Load(); n != 0 {
		t.Errorf("%d handlers still running after Run returned", n)
	}
	// Callbacks still in flight when Run returned must not crash the process.
	time.Sleep(300 * time.Millisecond)
}

func TestRun_RecordsProcessDurationWithoutSubjects(t *testing.T) {
	e := newEnv(t)
	e.addConsumer("metered", "t.m.>", 2*time.Second)
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })

	var rec recorder
	cfg := config("metered", func(_ context.Context, m function.Message) error {
		rec.add(m)
		if string(m.Data) == "bad" {
			return function.Permanent(errors.New("bad payload"))
		}
		return nil
	})
	cfg.Meters = provider
	e.start(cfg)

	const okSubject, badSubject = "t.m.order-42", "t.m.order-43"
	e.publish(okSubject, "ok", nil)
	e.publish(badSubject, "bad", nil)
	testenv.Eventually(t, 5*time.Second, "consumer settled", func() bool { return rec.total() == 2 && e.settled("metered")() })

	var points []metricdata.HistogramDataPoint[float64]
	testenv.Eventually(t, 5*time.Second, "two recorded durations", func() bool {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatalf("collect: %v", err)
		}
		points = nil
		var count uint64
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name != "messaging.process.duration" {
					continue
				}
				if sm.Scope.Name != function.MeterScope {
					t.Errorf("recorded under scope %q, want %q for every function", sm.Scope.Name, function.MeterScope)
				}
				if m.Unit != "s" {
					t.Errorf("unit = %q, want s", m.Unit)
				}
				h, ok := m.Data.(metricdata.Histogram[float64])
				if !ok {
					t.Fatalf("messaging.process.duration is %T, want a float64 histogram", m.Data)
				}
				points = h.DataPoints
				for _, p := range points {
					count += p.Count
				}
			}
		}
		return count == 2
	})

	results := map[string]bool{}
	for _, p := range points {
		attrs := map[string]string{}
		for _, kv := range p.Attributes.ToSlice() {
			v := kv.Value.Emit()
			attrs[string(kv.Key)] = v
			if strings.Contains(v, "order-4") || strings.Contains(string(kv.Key), "subject") {
				t.Errorf("attribute %s=%q carries the subject", kv.Key, v)
			}
		}
		if attrs["messaging.system"] != "nats" {
			t.Errorf("messaging.system = %q, want nats (attrs %v)", attrs["messaging.system"], attrs)
		}
		if attrs["messaging.consumer.group.name"] != "metered" || attrs["messaging.destination.name"] != workStream {
			t.Errorf("consumer/destination attributes = %v", attrs)
		}
		results[attrs["maint.result"]] = true
		if attrs["maint.result"] == "dead_letter" && attrs["error.type"] != "permanent" {
			t.Errorf("dead_letter point error.type = %q, want permanent", attrs["error.type"])
		}
	}
	if !results["ack"] || !results["dead_letter"] {
		t.Errorf("maint.result values = %v, want ack and dead_letter", results)
	}
}

// A message whose earlier deliveries died with their process (never settled) comes back past
// the budget: it is dead-lettered without running the handler again.
func TestRun_PastTheBudgetIsDeadLetteredWithoutTheHandler(t *testing.T) {
	e := newEnv(t)
	e.addConsumer("crash", "t.crash", time.Second)
	e.publish("t.crash", "kills-processes", nil)
	cons, err := e.js.Consumer(context.Background(), workStream, "crash")
	if err != nil {
		t.Fatal(err)
	}
	// Deliveries taken and never settled, as by processes that died holding them.
	for i := 0; i < budget; i++ {
		if _, err := cons.Next(jetstream.FetchMaxWait(3 * time.Second)); err != nil {
			t.Fatalf("delivery %d: %v", i+1, err)
		}
	}
	var called atomic.Bool
	e.start(config("crash", func(context.Context, function.Message) error { called.Store(true); return nil }))
	testenv.Eventually(t, 10*time.Second, "a dead letter", func() bool { return len(e.deadLetters()) == 1 })
	if called.Load() {
		t.Fatal("the handler ran on a message past its budget")
	}
	if r := e.deadLetters()[0].Header.Get(function.HeaderDLQReason); !strings.Contains(r, "past the budget") {
		t.Fatalf("reason %q", r)
	}
}

// A replica that starts while NATS is out of reach (a node restarting, a leader election)
// keeps looking its consumers up and serves them once NATS answers, instead of stopping.
func TestRun_StartedWhileNATSIsDownServesOnceItIsBack(t *testing.T) {
	dir := t.TempDir()
	cfg := embedded.Config{Name: "restart-0", StoreDir: dir, Listen: "127.0.0.1:0"}
	s := testenv.Server(t, cfg)
	nc, err := nats.Connect(s.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx := testenv.Context(t, time.Minute)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: workStream, Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, workStream, jetstream.ConsumerConfig{Durable: "late", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	cfg.Listen = strings.TrimPrefix(s.URL(), "nats://") // the same port again
	s.Stop()

	var handled atomic.Int32
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		c := config("late", func(context.Context, function.Message) error {
			handled.Add(1)
			return nil
		})
		done <- function.Run(runCtx, js, c)
	}()
	time.Sleep(1500 * time.Millisecond) // Run looks its consumer up while nothing answers
	select {
	case err := <-done:
		t.Fatalf("Run returned while NATS was down: %v", err)
	default:
	}
	testenv.Server(t, cfg)
	testenv.Eventually(t, 10*time.Second, "publish after the restart", func() bool {
		_, err := js.Publish(ctx, "t.late.1", []byte("x"))
		return err == nil
	})
	testenv.Eventually(t, 10*time.Second, "the message handled", func() bool { return handled.Load() >= 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil after a clean stop", err)
	}
}
