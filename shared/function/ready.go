package function

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Status is what the functions of a process tell its readiness probe: which consumers each
// one serves and whether it is serving or draining. Run updates the Status carried by its
// context (WithStatus); the probe reads it with Functions.
type Status struct {
	mu  sync.Mutex
	fns map[string]FunctionStatus
}

// FunctionStatus is one function's part of a Status.
type FunctionStatus struct {
	Name      string
	Stream    string
	Consumers []string
	Serving   bool // every consumer bound and being consumed
	Draining  bool // shutdown started: no new work should be routed here
}

// NewStatus returns an empty Status.
func NewStatus() *Status { return &Status{fns: map[string]FunctionStatus{}} }

type statusKey struct{}

// WithStatus makes Run report to s.
func WithStatus(ctx context.Context, s *Status) context.Context {
	return context.WithValue(ctx, statusKey{}, s)
}

// WithoutStatus makes Run report to no Status: a function that runs a Run of its own for each
// item it serves while the item exists (the webhook function's self-service subscriptions)
// reports itself once, with ReportServing, so that an item that ends does not read as the
// function draining.
func WithoutStatus(ctx context.Context) context.Context {
	return context.WithValue(ctx, statusKey{}, (*Status)(nil))
}

func statusFrom(ctx context.Context) *Status {
	s, _ := ctx.Value(statusKey{}).(*Status)
	return s
}

// Functions lists the functions that reported, by name.
func (s *Status) Functions() []FunctionStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]FunctionStatus, 0, len(s.fns))
	for _, f := range s.fns {
		f.Consumers = slices.Clone(f.Consumers)
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b FunctionStatus) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

func (s *Status) set(cfg Config, serving, draining bool) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fns[cfg.Name] = FunctionStatus{Name: cfg.Name, Stream: cfg.Stream, Consumers: slices.Clone(cfg.Consumers), Serving: serving, Draining: draining}
}

// DefaultDrainTimeout is how long a function lets the messages in hand finish after shutdown
// starts, unless Config.DrainTimeout says otherwise; a platform's termination grace period
// must be longer.
const DefaultDrainTimeout = 30 * time.Second

// ReportServing tells the Status carried by ctx (WithStatus) that the function called name,
// one that serves no consumer (the web view), is serving or draining: readiness waits for it.
func ReportServing(ctx context.Context, name string, serving, draining bool) {
	statusFrom(ctx).set(Config{Name: name}, serving, draining)
}
