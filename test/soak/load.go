package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// idPrefix starts the id of every command the soak sends, so that the audit picks them out.
const idPrefix = "soak-"

// fleet is the soak's load and its model of the entities it made: which are live, since when
// their record exists (their first command's outcome came), and when their Forget was sent;
// and each command's send time until its outcome, for the latency.
type fleet struct {
	rng   *rand.Rand
	churn float64 // the share of commands that make an entity, and the share that forget one

	mu        sync.Mutex
	made      int // entities made so far (the index of the next one)
	seq       int // commands made so far
	live      []string
	createdAt map[string]time.Time // resource ID -> when its first command's applied outcome came
	forgotAt  map[string]time.Time // resource ID -> when its Forget was sent
	creates   map[string]string    // first command id -> resource ID, until its outcome
	sentAt    map[string]time.Time // command id -> sent, until its outcome
	latencies []float64            // seconds, since the last take
	outcomes  int
	sent      map[string]bool
}

func newFleet(seed uint64, churn float64) *fleet {
	return &fleet{rng: rand.New(rand.NewPCG(seed, 34)), churn: churn, createdAt: map[string]time.Time{}, forgotAt: map[string]time.Time{},
		creates: map[string]string{}, sentAt: map[string]time.Time{}, sent: map[string]bool{}}
}

// next makes the next command: a new entity (Pending), a Forget of a live one, or any other
// command on a live one, every task, forced or not, refused or not.
func (f *fleet) next(now time.Time) domain.Command {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	id := fmt.Sprintf("%s%09d", idPrefix, f.seq)
	r := f.rng.Float64()
	switch {
	case r < f.churn || len(f.live) < 2:
		res := testenv.ResourceID("soak", f.made)
		f.made++
		f.live = append(f.live, res)
		f.creates[id] = res
		return domain.Command{ID: id, ResourceID: res, Task: domain.TaskPending, Reason: "soak", Actor: "soak"}
	case r < 2*f.churn:
		i := f.rng.IntN(len(f.live))
		res := f.live[i]
		f.live[i] = f.live[len(f.live)-1]
		f.live = f.live[:len(f.live)-1]
		f.forgotAt[res] = now
		return domain.Command{ID: id, ResourceID: res, Task: domain.TaskForget, Actor: "soak"}
	}
	res := f.live[f.rng.IntN(len(f.live))]
	for {
		c := testenv.RandomCommands(f.rng, 1, []string{res})[0]
		if c.Task != domain.TaskForget {
			c.ID = id
			return c
		}
	}
}

// send publishes cmds (testenv.PublishAll: retried with the same ids until stored).
func (f *fleet) send(t *testenv.Program, js jetstream.JetStream, cmds []domain.Command) {
	now := time.Now()
	f.mu.Lock()
	for _, c := range cmds {
		f.sentAt[c.ID] = now
		f.sent[c.ID] = true
	}
	f.mu.Unlock()
	testenv.PublishAll(t, js, cmds, nil)
}

// follow notes every outcome event of the soak's commands as it is published (a core
// subscription: what it misses while the server restarts only goes unmeasured).
func (f *fleet) follow(nc *nats.Conn) (*nats.Subscription, error) {
	return nc.Subscribe(domain.EventPrefix+">", func(m *nats.Msg) {
		ev, err := domain.DecodeEvent(m.Data)
		if err != nil || !strings.HasPrefix(ev.CommandID, idPrefix) {
			return
		}
		f.outcome(ev, time.Now())
	})
}

func (f *fleet) outcome(ev domain.Event, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if at, ok := f.sentAt[ev.CommandID]; ok {
		f.latencies = append(f.latencies, now.Sub(at).Seconds())
		delete(f.sentAt, ev.CommandID)
		f.outcomes++
	}
	if res, ok := f.creates[ev.CommandID]; ok {
		delete(f.creates, ev.CommandID)
		if ev.Outcome == domain.OutcomeApplied {
			f.createdAt[res] = now
		}
	}
}

// takeLatencies returns the latencies since the last call, and forgets sends older than a
// minute whose outcome the subscription missed.
func (f *fleet) takeLatencies(now time.Time) []float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.latencies
	f.latencies = nil
	for id, at := range f.sentAt {
		if now.Sub(at) > time.Minute {
			delete(f.sentAt, id)
		}
	}
	return out
}

// outcomesSeen is how many outcomes of sent commands came.
func (f *fleet) outcomesSeen() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.outcomes
}

// expected are the entities a tick at at must export: made (their record written) a second
// before it, and not forgotten before the tick's run is over.
func (f *fleet) expected(at time.Time, tick time.Duration) map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]bool{}
	for res, made := range f.createdAt {
		if !made.Before(at.Add(-time.Second)) {
			continue
		}
		if forgot, ok := f.forgotAt[res]; ok && forgot.Before(at.Add(tick)) {
			continue
		}
		out[res] = true
	}
	return out
}

// prune drops entities forgotten long ago from the model.
func (f *fleet) prune(before time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for res, at := range f.forgotAt {
		if at.Before(before) {
			delete(f.forgotAt, res)
			delete(f.createdAt, res)
		}
	}
}

// sentIDs are the ids of every command sent.
func (f *fleet) sentIDs() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent
}

// make sends n commands at once and waits (up to within) for their outcomes: it returns how
// long they took.
func (f *fleet) burst(t *testenv.Program, js jetstream.JetStream, n int, within time.Duration) (time.Duration, error) {
	before := f.outcomesSeen()
	now := time.Now()
	cmds := make([]domain.Command, n)
	for i := range cmds {
		cmds[i] = f.next(now)
	}
	f.send(t, js, cmds)
	deadline := now.Add(within)
	for f.outcomesSeen() < before+n {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d of %d outcomes within %s", f.outcomesSeen()-before, n, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(now), nil
}

// steady sends rate commands per second until ctx ends, in batches every 100 ms.
func (f *fleet) steady(ctx context.Context, t *testenv.Program, js jetstream.JetStream, rate float64) {
	const every = 100 * time.Millisecond
	start := time.Now()
	done := 0
	for ctx.Err() == nil {
		due := int(time.Since(start).Seconds() * rate)
		now := time.Now()
		var cmds []domain.Command
		for ; done < due; done++ {
			cmds = append(cmds, f.next(now))
		}
		if len(cmds) > 0 {
			f.send(t, js, cmds)
		}
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
}
