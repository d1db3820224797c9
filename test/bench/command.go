package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/command"
	"maintsignals/shared/domain"
	"maintsignals/shared/store"
)

// rawGetUpdate is the raw limit: workers doing KV Get + Update on distinct keys of a bucket
// with replicas, nothing else.
func rawGetUpdate(ctx context.Context, js jetstream.JetStream, workers int, d time.Duration, replicas int) (float64, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "bench_raw", History: 1, Replicas: replicas})
	if err != nil {
		return 0, err
	}
	defer js.DeleteKeyValue(context.WithoutCancel(ctx), "bench_raw")
	var ops atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	deadline := time.Now().Add(d)
	start := time.Now()
	for w := 0; w < workers; w++ {
		key := fmt.Sprintf("k%d", w)
		if _, err := kv.Create(ctx, key, []byte(`{"state":"None"}`)); err != nil {
			return 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				e, err := kv.Get(ctx, key)
				if err != nil {
					errs <- err
					return
				}
				// The revision just read, and another go when it moved meanwhile (on a replicated
				// bucket a write that timed out and was retried may have landed): the
				// compare-and-swap loop of a user's code.
				if _, err := kv.Update(ctx, key, e.Value(), e.Revision()); errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
					continue
				} else if err != nil {
					errs <- err
					return
				}
				ops.Add(1)
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	return float64(ops.Load()) / time.Since(start).Seconds(), nil
}

// alwaysApplied alternates Pending and None so that every command is applied: each one costs
// the whole path (read, write, event).
func alwaysApplied(i, keys int, run string) domain.Command {
	task := domain.TaskPending
	if (i/keys)%2 == 1 {
		task = domain.TaskNone
	}
	return domain.Command{
		ID:         fmt.Sprintf("%s-%d", run, i),
		ResourceID: fmt.Sprintf("/subscriptions/bench/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/%s-%d", run, i%keys),
		Task:       task,
	}
}

// command is the i-th command of a run.
func (s sender) command(i, keys int, run string) domain.Command {
	if s.gen == nil {
		return alwaysApplied(i, keys, run)
	}
	return s.gen(i, keys, run)
}

// startReplicas runs n command-function replicas, each on its own connection.
// auth nil accepts unsigned commands.
func startReplicas(ctx context.Context, connect func() (*nats.Conn, error), n int, auth command.Authority) (stop func(), err error) {
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		nc, err := connect()
		if err != nil {
			cancel()
			return nil, err
		}
		js, _ := jetstream.New(nc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer nc.Close()
			_ = command.Run(cctx, js, command.Config{EntityRate: -1, Auth: auth}) // the load repeats keys on purpose
		}()
	}
	return func() { cancel(); wg.Wait() }, nil
}

// outcomes counts outcome events and records when each command's arrived.
type outcomes struct {
	mu   sync.Mutex
	at   map[string]time.Time
	done chan struct{}
	want int
}

func watchOutcomes(nc *nats.Conn, want int) (*outcomes, *nats.Subscription, error) {
	o := &outcomes{at: make(map[string]time.Time, want), done: make(chan struct{}), want: want}
	sub, err := nc.Subscribe(domain.AllEventsFilter, func(m *nats.Msg) {
		now := time.Now()
		ev, err := domain.DecodeEvent(m.Data)
		if err != nil {
			return
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if _, dup := o.at[ev.CommandID]; dup {
			return
		}
		o.at[ev.CommandID] = now
		if len(o.at) == o.want {
			close(o.done)
		}
	})
	if err != nil {
		return nil, nil, err
	}
	sub.SetPendingLimits(-1, -1)
	return o, sub, nil
}

// commandThroughput publishes n always-applied commands over keys entities (signed as snd
// signs) as fast as the server takes them and returns commands per second from the first
// publish until the last outcome event is stored in the events stream. It then checks every outcome: applied, and in
// command order per entity (a fast wrong answer is no answer).
func commandThroughput(ctx context.Context, nc *nats.Conn, n, keys int, snd sender) (float64, error) {
	js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	first, err := eventsEnd(ctx, js)
	if err != nil {
		return 0, err
	}
	run := fmt.Sprintf("tp%d", time.Now().UnixNano())
	// Made (and signed) before the clock starts: the senders' work is not the function's.
	msgs := make([]*nats.Msg, n)
	for i := range msgs {
		if msgs[i], err = snd.msg(snd.command(i, keys, run)); err != nil {
			return 0, err
		}
	}
	stored := make(chan error, 1)
	// Polling the stream (not subscribing to every event) keeps the measuring off the
	// measured path.
	go func() {
		for {
			now, err := eventsEnd(ctx, js)
			if err != nil {
				stored <- err
				return
			}
			var got uint64
			for s, seq := range now {
				got += seq - first[s]
			}
			if got >= uint64(n) {
				stored <- nil
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := publishAsync(ctx, js, msgs[i]); err != nil {
			return 0, err
		}
	}
	select {
	case err := <-stored:
		if err != nil {
			return 0, err
		}
	case <-time.After(5 * time.Minute):
		return 0, fmt.Errorf("throughput: outcomes missing after 5 minutes")
	}
	rate := float64(n) / time.Since(start).Seconds()
	return rate, checkOutcomes(ctx, js, first, n, keys, run)
}

// eventsEnd is, for each cell's events stream, the sequence the next event will have.
func eventsEnd(ctx context.Context, js jetstream.JetStream) (map[string]uint64, error) {
	out := map[string]uint64{}
	for _, name := range domain.EventsStreams() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return nil, err
		}
		out[name] = s.CachedInfo().State.LastSeq + 1
	}
	return out, nil
}

// checkOutcomes reads the n outcome events from the sequences first and checks that each
// command was applied, once, in order per entity (an entity's events are in one cell).
func checkOutcomes(ctx context.Context, js jetstream.JetStream, first map[string]uint64, n, keys int, run string) error {
	last := make(map[int]int, keys)
	seen := 0
	end, err := eventsEnd(ctx, js)
	if err != nil {
		return err
	}
	for stream, from := range first {
		if end[stream] == from {
			continue // nothing stored in this cell
		}
		err := store.Read(ctx, js, stream, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from,
		}, 0, func(m jetstream.Msg, _ uint64) error {
			seen++
			return checkOutcome(m, keys, run, last)
		})
		if err != nil {
			return fmt.Errorf("check outcomes: %w", err)
		}
	}
	if seen < n {
		return fmt.Errorf("check outcomes: %d outcomes, want %d", seen, n)
	}
	return nil
}

// checkOutcome checks one outcome of a throughput run: applied, after the entity's last.
func checkOutcome(m jetstream.Msg, keys int, run string, last map[int]int) error {
	ev, err := domain.DecodeEvent(m.Data())
	if err != nil {
		return err
	}
	var i int
	if _, err := fmt.Sscanf(ev.CommandID, run+"-%d", &i); err != nil {
		return fmt.Errorf("unexpected command %q", ev.CommandID)
	}
	if ev.Outcome != domain.OutcomeApplied {
		return fmt.Errorf("command %s: %s (%s)", ev.CommandID, ev.Outcome, ev.Message)
	}
	if prev, ok := last[i%keys]; ok && prev >= i {
		return fmt.Errorf("command %s applied after %s-%d", ev.CommandID, run, prev)
	}
	last[i%keys] = i
	return nil
}

// commandLatency offers rate commands per second for d and returns the p50 and p99 latency from
// publish to outcome event.
func commandLatency(ctx context.Context, nc *nats.Conn, rate int, d time.Duration, keys int) (p50, p99 time.Duration, err error) {
	n := int(float64(rate) * d.Seconds())
	o, sub, err := watchOutcomes(nc, n)
	if err != nil {
		return 0, 0, err
	}
	defer sub.Unsubscribe()
	js, _ := jetstream.New(nc)
	sent := make(map[string]time.Time, n)
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := 0; i < n; i++ {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		c := alwaysApplied(i, keys, "lat")
		sent[c.ID] = time.Now()
		if err := publishAsync(ctx, js, commandMsg(c)); err != nil {
			return 0, 0, err
		}
	}
	select {
	case <-o.done:
	case <-time.After(2 * time.Minute):
		return 0, 0, fmt.Errorf("latency: %d of %d outcomes", len(o.at), n)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	lat := make([]time.Duration, 0, n)
	for id, t0 := range sent {
		lat = append(lat, o.at[id].Sub(t0))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2], lat[len(lat)*99/100], nil
}

func commandMsg(c domain.Command) *nats.Msg {
	b, _ := c.Encode()
	m := nats.NewMsg(domain.CommandSubject(domain.MustKey(c.ResourceID)))
	m.Data = b
	m.Header.Set(domain.HeaderMsgID, c.ID)
	return m
}

// publishAsync publishes without waiting for the ack, waiting for the outstanding ones when
// too many are in flight (the server is the bottleneck then, not the publisher).
func publishAsync(ctx context.Context, js jetstream.JetStream, m *nats.Msg) error {
	for {
		_, err := js.PublishMsgAsync(m)
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return err
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
