package emitter_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"maintsignals/functions/emitter"
	"maintsignals/shared/domain"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// TestEmit_RequestsStayUnderTheCollectorLimit sends a fleet whose points add up to several
// times a collector's default 4 MiB gRPC limit to a receiver that enforces that limit, and
// checks every request: under the limit, gzipped, entities whole, fleet view at the end.
func TestEmit_RequestsStayUnderTheCollectorLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		entities int
		pucm     bool
		id       func(int) string
	}{
		{name: "30k entities with typical IDs", entities: 30000, id: fleetID},
		{name: "6k entities with the longest IDs", entities: 6000, pucm: true, id: func(i int) string {
			return fmt.Sprintf("/%s/%06d", strings.Repeat("x", domain.MaxResourceIDBytes-8), i)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := testenv.Start(t, testenv.WithTick(time.Minute))
			r := otlpreceiver.Start(t)
			counts := fill(t, env, tt.entities, tt.id)
			// A generous deadline: this test checks the requests, not the speed, and the race
			// detector on a busy machine can take most of the default 30 s for 30k entities.
			e, err := emitter.New(context.Background(), env.JS, newTelemetry(t, r, otlpreceiver.GRPC), emitter.Config{PUCM: tt.pucm, Logger: testenv.Quiet(), ExportTimeout: 2 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			start := time.Now()
			res, err := e.Emit(testenv.Context(t, 2*time.Minute))
			if err != nil {
				t.Fatalf("Emit: %v", err)
			}
			took := time.Since(start)

			var status, maxSize, maxWire, total, totalWire int
			var exports, fleets []otlpreceiver.Export
			fleetAt := -1
			for _, x := range r.Exports() {
				// The health metrics travel in requests of their own.
				if x.Has(emitter.MetricStatus) || x.Has(emitter.MetricEntities) {
					exports = append(exports, x)
				}
			}
			for i, x := range exports {
				n := len(x.Find(emitter.MetricStatus, nil))
				status += n
				total += x.Size
				totalWire += x.WireSize
				maxSize, maxWire = max(maxSize, x.Size), max(maxWire, x.WireSize)
				switch {
				case x.Size >= otlpreceiver.DefaultMaxRecvMsgSize:
					t.Errorf("request %d: %d bytes, over the 4 MiB limit", i, x.Size)
				case x.Encoding != "gzip":
					t.Errorf("request %d not gzipped", i)
				case n%len(domain.States) != 0:
					t.Errorf("request %d: %d status points, an entity was split", i, n)
				case x.DataPoints > emitter.DefaultBatchSize+len(domain.States):
					t.Errorf("request %d: %d points, over the batch size", i, x.DataPoints)
				}
				if x.Has(emitter.MetricEntities) {
					fleets = append(fleets, x)
					fleetAt = i
				}
			}
			// Requests go out two at a time: the fleet view is in one of the last two.
			if len(fleets) != 1 || fleetAt < len(exports)-2 {
				t.Errorf("%d requests carry the fleet view, want one of the last two", len(fleets))
			}
			if status != tt.entities*len(domain.States) || res.Entities != tt.entities || res.Requests != len(exports) {
				t.Errorf("%d status points in %d requests, result %+v; want %d entities", status, len(exports), res, tt.entities)
			}
			if len(fleets) == 0 {
				t.FailNow()
			}
			if got := fleet(fleets[0]); got != fmt.Sprintf("none=%d pending=%d planned=%d unplanned=%d customer_action_needed=%d", counts[0], counts[1], counts[2], counts[3], counts[4]) {
				t.Errorf("fleet %s, want counts %v", got, counts)
			}
			t.Logf("%d entities, %d points: %d requests, largest %.2f MB (%.2f MB gzipped), total %.1f MB (%.1f MB gzipped), %s",
				tt.entities, res.Points, len(exports), float64(maxSize)/1e6, float64(maxWire)/1e6,
				float64(total)/1e6, float64(totalWire)/1e6, took.Round(time.Millisecond))
		})
	}
}
