package emitter

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"maintsignals/shared/domain"
)

// render lists the points of scope metrics as metric{attr=value,…} unit value @time, sorted.
func render(sm *metricpb.ScopeMetrics) []string {
	var out []string
	for _, m := range sm.Metrics {
		for _, p := range m.GetGauge().GetDataPoints() {
			var attrs []string
			for _, kv := range p.Attributes {
				attrs = append(attrs, kv.Key+"="+kv.GetValue().GetStringValue())
			}
			var v string
			switch x := p.Value.(type) {
			case *metricpb.NumberDataPoint_AsInt:
				v = fmt.Sprint(x.AsInt)
			case *metricpb.NumberDataPoint_AsDouble:
				v = fmt.Sprint(x.AsDouble)
			}
			out = append(out, fmt.Sprintf("%s{%s} %s %s @%d", m.Name, strings.Join(attrs, ","), m.Unit, v, p.TimeUnixNano))
		}
	}
	sort.Strings(out)
	return out
}

// A request's points keep their contract (names, units, attributes in key order, the run's
// time), and a batch reused for the next request leaves the bytes of the last one as they were.
func TestBatch_BuildsThePointsOfTheContractAndIsReusedSafely(t *testing.T) {
	cfg, err := Config{PUCM: true}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 5)
	win := &domain.Window{Start: time.Unix(1_800_003_600, 0), End: time.Unix(1_800_007_200, 0)}
	var pool []*batch
	get := func() *batch {
		if len(pool) > 0 {
			b := pool[0]
			pool = pool[1:]
			return b
		}
		return newBatch(cfg.BatchSize)
	}
	b := newBatcher(0, domain.Shard{Index: 2, Of: 4}, now, cfg, get)
	b.add("/c/A", 1, domain.Record{State: domain.StatePending, Window: win, StateSince: time.Unix(1_799_999_000, 0)}, place{1, 10})
	b.conflict()
	first := b.finish(place{2, 0})
	raw, err := proto.Marshal(first.seal())
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprint(now.UnixNano())
	want := []string{
		"cluster.maintenance.conflicts{cluster.maintenance.emitter.shard=2} {entity} 1 @" + ns,
		"cluster.maintenance.entities{cluster.maintenance.emitter.shard=2,cluster.maintenance.state=customer_action_needed} {entity} 0 @" + ns,
		"cluster.maintenance.entities{cluster.maintenance.emitter.shard=2,cluster.maintenance.state=none} {entity} 0 @" + ns,
		"cluster.maintenance.entities{cluster.maintenance.emitter.shard=2,cluster.maintenance.state=pending} {entity} 1 @" + ns,
		"cluster.maintenance.entities{cluster.maintenance.emitter.shard=2,cluster.maintenance.state=planned} {entity} 0 @" + ns,
		"cluster.maintenance.entities{cluster.maintenance.emitter.shard=2,cluster.maintenance.state=unplanned} {entity} 0 @" + ns,
		"cluster.maintenance.overdue{cluster.maintenance.emitter.shard=2} {entity} 0 @" + ns,
		"cluster.maintenance.pucm{resourceId=/c/A,state=pending} 1 1 @" + ns,
		"cluster.maintenance.state.start_time{cloud.resource_id=/c/A} s 1.799999e+09 @" + ns,
		"cluster.maintenance.status{cloud.resource_id=/c/A,cluster.maintenance.state=customer_action_needed} 1 0 @" + ns,
		"cluster.maintenance.status{cloud.resource_id=/c/A,cluster.maintenance.state=none} 1 0 @" + ns,
		"cluster.maintenance.status{cloud.resource_id=/c/A,cluster.maintenance.state=pending} 1 1 @" + ns,
		"cluster.maintenance.status{cloud.resource_id=/c/A,cluster.maintenance.state=planned} 1 0 @" + ns,
		"cluster.maintenance.status{cloud.resource_id=/c/A,cluster.maintenance.state=unplanned} 1 0 @" + ns,
		"cluster.maintenance.stuck{cluster.maintenance.emitter.shard=2} {entity} 0 @" + ns,
		"cluster.maintenance.window.end_time{cloud.resource_id=/c/A} s 1.8000072e+09 @" + ns,
		"cluster.maintenance.window.start_time{cloud.resource_id=/c/A} s 1.8000036e+09 @" + ns,
	}
	if got := render(first.seal()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("points:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, m := range first.seal().Metrics {
		if m.Description == "" {
			t.Errorf("%s has no description", m.Name)
		}
	}

	// The same arenas carry the next request: the first one's bytes decode as before.
	pool = append(pool, first)
	b2 := newBatcher(0, domain.Shard{Index: 2, Of: 4}, now.Add(time.Minute), cfg, get)
	b2.add("/c/B-a-longer-id", 3, domain.Record{State: domain.StateUnplanned}, place{1, 11})
	second := b2.finish(place{2, 0})
	if second != first {
		t.Fatal("the batch was not reused")
	}
	var again metricpb.ScopeMetrics
	if err := proto.Unmarshal(raw, &again); err != nil {
		t.Fatal(err)
	}
	if got := render(&again); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("first request after reuse:\n%s", strings.Join(got, "\n"))
	}
	for _, line := range render(second.seal()) {
		if strings.Contains(line, "/c/A") || strings.Contains(line, "window") || strings.Contains(line, "@"+ns) {
			t.Errorf("reused batch kept a point of the previous request: %s", line)
		}
	}
}
