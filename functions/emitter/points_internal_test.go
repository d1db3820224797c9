package emitter

import (
	"strings"
	"testing"
	"time"

	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"maintsignals/shared/domain"
)

func TestEmitted_NoneOnlyWithinRetention(t *testing.T) {
	now := time.Date(2025, 4, 1, 12, 0, 0, 0, time.UTC)
	const retention = 24 * time.Hour
	tests := []struct {
		name  string
		state domain.State
		since time.Time
		want  bool
	}{
		{"pending long ago", domain.StatePending, now.Add(-1000 * time.Hour), true},
		{"planned", domain.StatePlanned, now, true},
		{"unplanned", domain.StateUnplanned, now.Add(-48 * time.Hour), true},
		{"customer action needed", domain.StateCustomerActionNeeded, time.Time{}, true},
		{"none just now", domain.StateNone, now, true},
		{"none just inside retention", domain.StateNone, now.Add(-retention + time.Nanosecond), true},
		{"none at retention", domain.StateNone, now.Add(-retention), false},
		{"none long ago", domain.StateNone, now.Add(-100 * retention), false},
		{"none without stateSince", domain.StateNone, time.Time{}, false},
		{"none with stateSince ahead of the clock", domain.StateNone, now.Add(time.Minute), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := emitted(domain.Record{State: tt.state, StateSince: tt.since}, now, retention); got != tt.want {
				t.Errorf("emitted = %v, want %v", got, tt.want)
			}
		})
	}
}

// points counts the data points of a batch per metric.
func points(sm *metricpb.ScopeMetrics) map[string]int {
	out := map[string]int{}
	for _, m := range sm.Metrics {
		out[m.Name] += len(m.GetGauge().DataPoints)
	}
	return out
}

func TestBatcher_KeepsEntitiesWholeWithinBothLimits(t *testing.T) {
	tests := []struct {
		name      string
		cfg       Config
		idLen     int
		entities  int
		wantSizes []int // entities per request, the last one with the fleet view
	}{
		{name: "points limit", cfg: Config{BatchSize: 12}, idLen: 20, entities: 5, wantSizes: []int{2, 2, 1}},
		{name: "points limit with pucm", cfg: Config{BatchSize: 12, PUCM: true}, idLen: 20, entities: 5, wantSizes: []int{2, 2, 1}},
		{name: "exact fit", cfg: Config{BatchSize: 10}, idLen: 20, entities: 4, wantSizes: []int{2, 2}},
		// 5 points of ~660 bytes estimated each: 3.3 KB per entity, 64 KiB (less 4 KiB of
		// overhead) holds 18.
		{name: "bytes limit", cfg: Config{BatchSize: 100000, MaxRequestBytes: 64 << 10}, idLen: 512, entities: 40, wantSizes: []int{18, 18, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tt.cfg.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			b := newBatcher(0, domain.Shard{Index: 0, Of: 1}, time.Now(), cfg, func() *batch { return newBatch(cfg.BatchSize) })
			var batches []*batch
			for i := 0; i < tt.entities; i++ {
				id := "/" + strings.Repeat("x", tt.idLen-4) + string(rune('a'+i%26)) + string(rune('a'+i/26)) + "z"
				if full := b.add(id, 1+i%4, domain.Record{}, place{ord: i + 1, rev: uint64(i + 1)}); full != nil {
					batches = append(batches, full)
				}
			}
			batches = append(batches, b.finish(place{ord: tt.entities + 1}))
			var sizes []int
			for i, bt := range batches {
				n := points(bt.seal())
				sizes = append(sizes, n[MetricStatus]/len(domain.States))
				if cfg.PUCM && n[MetricPUCM] != n[MetricStatus]/len(domain.States) {
					t.Errorf("batch %d: %d pucm points for %d entities", i, n[MetricPUCM], n[MetricStatus]/len(domain.States))
				}
				if n[MetricStatus]+n[MetricPUCM] > cfg.BatchSize {
					t.Errorf("batch %d: %d entity points, over the batch size %d", i, n[MetricStatus]+n[MetricPUCM], cfg.BatchSize)
				}
				if wantFleet := i == len(batches)-1; (n[MetricEntities] == len(domain.States)) != wantFleet {
					t.Errorf("batch %d: %d fleet points", i, n[MetricEntities])
				}
			}
			if len(sizes) != len(tt.wantSizes) {
				t.Fatalf("entities per batch %v, want %v", sizes, tt.wantSizes)
			}
			for i := range sizes {
				if sizes[i] != tt.wantSizes[i] {
					t.Fatalf("entities per batch %v, want %v", sizes, tt.wantSizes)
				}
			}
			if b.entities != tt.entities {
				t.Errorf("counted %d entities, want %d", b.entities, tt.entities)
			}
		})
	}
}
