package telemetry

import (
	"context"
	"fmt"
	"runtime/metrics"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/semconv/v1.40.0/goconv"
)

// RuntimeScope is the instrumentation scope of the process's own Go runtime metrics.
const RuntimeScope = "maintsignals/shared/telemetry/runtime"

// runtimeSamples are the runtime/metrics read at each collection, in this order.
var runtimeSamples = []string{
	"/sched/goroutines:goroutines",
	"/gc/heap/goal:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/stacks:bytes",
}

// registerRuntime makes the provider export the process's goroutines and memory, under
// the Go runtime semantic conventions (go.goroutine.count, go.memory.gc.goal, go.memory.used
// by go.memory.type), read at each collection: a leak of goroutines or of heap shows in the
// metrics before it shows in the pod's memory limit.
func registerRuntime(mp metric.MeterProvider) error {
	m := mp.Meter(RuntimeScope)
	goroutines, err := goconv.NewGoroutineCount(m)
	if err != nil {
		return fmt.Errorf("telemetry: runtime metrics: %w", err)
	}
	goal, err := goconv.NewMemoryGCGoal(m)
	if err != nil {
		return fmt.Errorf("telemetry: runtime metrics: %w", err)
	}
	used, err := goconv.NewMemoryUsed(m)
	if err != nil {
		return fmt.Errorf("telemetry: runtime metrics: %w", err)
	}
	stack := metric.WithAttributes(attribute.String("go.memory.type", "stack"))
	other := metric.WithAttributes(attribute.String("go.memory.type", "other"))
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := make([]metrics.Sample, len(runtimeSamples))
		for i, name := range runtimeSamples {
			s[i].Name = name
		}
		metrics.Read(s)
		v := func(i int) int64 { return int64(s[i].Value.Uint64()) }
		o.ObserveInt64(goroutines.Inst(), v(0))
		o.ObserveInt64(goal.Inst(), v(1))
		o.ObserveInt64(used.Inst(), v(4), stack)
		o.ObserveInt64(used.Inst(), v(2)-v(3)-v(4), other)
		return nil
	}, goroutines.Inst(), goal.Inst(), used.Inst())
	if err != nil {
		return fmt.Errorf("telemetry: runtime metrics: %w", err)
	}
	return nil
}
