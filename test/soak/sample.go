package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// The Go runtime metrics every function exports (shared/telemetry, semantic conventions).
const (
	metricGoroutines = "go.goroutine.count"
	metricHeapGoal   = "go.memory.gc.goal"
)

// sampler takes one sample of every series each tick.
type sampler struct {
	stack    *stack
	js       jetstream.JetStream
	r        *otlpreceiver.Receiver
	fleet    *fleet
	tick     time.Duration
	settle   time.Duration // samples of a process this soon after its start are left out
	backlogF float64       // the floor of a backlog: a tick's commands

	mu      sync.Mutex
	series  map[string]*series
	started map[string]time.Time // role -> when its current lifetime started
	runtime map[string]runtimeValues
}

// runtimeValues are the latest runtime metrics of a role's process.
type runtimeValues struct {
	life             int
	goroutines, heap float64
	at               time.Time
}

func newSampler(st *stack, js jetstream.JetStream, r *otlpreceiver.Receiver, f *fleet, tick, settle time.Duration, rate float64) *sampler {
	return &sampler{stack: st, js: js, r: r, fleet: f, tick: tick, settle: settle, backlogF: rate * tick.Seconds(),
		series: map[string]*series{}, started: map[string]time.Time{}, runtime: map[string]runtimeValues{}}
}

// get returns the series of name, made with unit and floor the first time.
func (s *sampler) get(name, unit string, floor float64) *series {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.series[name]
	if x == nil {
		x = &series{name: name, unit: unit, floor: floor}
		s.series[name] = x
	}
	return x
}

// all lists the series by name.
func (s *sampler) all() []*series {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*series, 0, len(s.series))
	for _, x := range s.series {
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// take samples every series once.
func (s *sampler) take(ctx context.Context, now time.Time) {
	s.readRuntime()
	for role, p := range s.stack.running() {
		if s.lifeStart(role, p.life, now).Add(s.settle).After(now) {
			continue
		}
		pid := strconv.Itoa(p.pid)
		if role == natsRole {
			s.get("rss nats-server", "B", 0).add(now, p.life, float64(testenv.ProcMemory(pid, "VmRSS")))
			continue
		}
		s.get("rss "+role, "B", 0).add(now, p.life, float64(testenv.ProcMemory(pid, "VmRSS")))
		if n := testenv.OpenFiles(pid); n >= 0 {
			s.get("files "+role, "", 0).add(now, p.life, float64(n))
		}
		s.mu.Lock()
		rt, ok := s.runtime[role]
		s.mu.Unlock()
		if ok && rt.life == p.life && now.Sub(rt.at) < 2*s.tick {
			s.get("goroutines "+role, "", 0).add(now, p.life, rt.goroutines)
			s.get("heap "+role, "B", 0).add(now, p.life, rt.heap)
		}
	}
	if lat := s.fleet.takeLatencies(now); len(lat) > 0 {
		s.get("command p99", "s", 0.01).add(now, 0, percentile(lat, 99))
	}
	if err := s.streams(ctx, now); err != nil {
		s.stack.t.Logf("sample of the streams left out: %v", err)
	}
}

// lifeStart is when the sampler first saw the lifetime life of role.
func (s *sampler) lifeStart(role string, life int, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := role + "/" + strconv.Itoa(life)
	at, ok := s.started[key]
	if !ok {
		s.started[key] = now
		at = now
	}
	return at
}

// readRuntime keeps the latest goroutines and heap goal of each role from the requests
// received since the last call, then drops the requests (the coverage counts stay).
func (s *sampler) readRuntime() {
	for _, e := range s.r.Exports() {
		if !e.Has(metricGoroutines) {
			continue
		}
		for _, p := range e.Points() {
			if p.Metric != metricGoroutines && p.Metric != metricHeapGoal {
				continue
			}
			role := p.Resource["replica"]
			life, _ := strconv.Atoi(p.Resource["soak.life"])
			s.mu.Lock()
			rt := s.runtime[role]
			if rt.life != life {
				rt = runtimeValues{life: life}
			}
			if p.Metric == metricGoroutines {
				rt.goroutines = p.Value
			} else {
				rt.heap = p.Value
			}
			rt.at = e.At
			s.runtime[role] = rt
			s.mu.Unlock()
		}
	}
	s.r.Reset()
}

// streams samples the consumers' backlogs (messages pending and unacknowledged, per stream,
// of the work consumers) and the records buckets' bytes and interior deletes.
func (s *sampler) streams(ctx context.Context, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, s.tick)
	defer cancel()
	var bytes, deleted uint64
	for _, c := range domain.AllCells() {
		st, err := s.js.Stream(ctx, c.RecordsStream())
		if err != nil {
			return fmt.Errorf("bucket %s: %w", c.RecordsStream(), err)
		}
		bytes += st.CachedInfo().State.Bytes
		deleted += uint64(st.CachedInfo().State.NumDeleted)
	}
	s.get("bucket bytes", "B", 0).add(now, 0, float64(bytes))
	s.get("bucket interior deletes", "", 0).add(now, 0, float64(deleted))
	for _, name := range []string{domain.CommandsStream, domain.ScheduleStream, domain.WebhookStream, domain.PoliciesStream, domain.SubscriptionsStream} {
		n, err := backlog(ctx, s.js, name)
		if err != nil {
			return err
		}
		s.get("backlog "+name, "", s.backlogF).add(now, 0, float64(n))
	}
	return nil
}

// backlog is what the work consumers of a stream have pending or unacknowledged.
func backlog(ctx context.Context, js jetstream.JetStream, stream string) (uint64, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("backlog of %s: %w", stream, err)
	}
	var n uint64
	list := st.ListConsumers(ctx)
	for info := range list.Info() {
		// The readers' ordered consumers acknowledge nothing: only the work consumers count.
		if info.Config.AckPolicy != jetstream.AckNonePolicy {
			n += info.NumPending + uint64(info.NumAckPending)
		}
	}
	if err := list.Err(); err != nil {
		return 0, fmt.Errorf("backlog of %s: %w", stream, err)
	}
	return n, nil
}
