package regions_test

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/shared/regions"
	"maintsignals/test/testenv"
)

// BenchmarkRead_40Regions reads the hub's view of 40 regions of 4 shards (1,000,000 entities
// in all), each part published straight into the hub's stream in place of its source: the
// hub's work for one look at the view (a page, the API, a metrics collection). It reports the
// bytes of one part and of one tick of every region.
func BenchmarkRead_40Regions(b *testing.B) {
	const regionCount, shards, fleet = 40, 4, 1_000_000
	hub := testenv.StartHub(b)
	ctx := testenv.Context(b, time.Minute)
	var names []string
	for i := range regionCount {
		names = append(names, fmt.Sprintf("region-%02d", i))
	}
	sc := provision.RegionsStream(provision.HubConfig{Regions: names})
	sc.Subjects = []string{domain.SummarySubjects} // the parts published here, beside the sources
	if _, err := hub.JS.CreateStream(ctx, sc); err != nil {
		b.Fatal(err)
	}
	per := int64(fleet / regionCount / shards)
	now := time.Now()
	size := 0
	for _, r := range names {
		for s := range shards {
			p := domain.Summary{Version: 1, Region: r, Shard: s, Shards: shards, At: now, TickSeconds: 60, Revision: 123456789,
				Counts:   map[domain.State]int64{domain.StateNone: per / 2, domain.StatePending: per / 4, domain.StatePlanned: per / 8, domain.StateUnplanned: per / 16, domain.StateCustomerActionNeeded: per / 16},
				Updating: per / 10, Overdue: 12, Stuck: 3, Conflicts: 1}
			body, _ := json.Marshal(p)
			size = len(body)
			sh := domain.Shard{Index: s, Of: shards}
			if _, err := hub.JS.Publish(ctx, domain.SummarySubject(r, sh), body, jetstream.WithMsgID(domain.SummaryMsgID(r, sh, now))); err != nil {
				b.Fatal(err)
			}
		}
	}
	cpu0 := cpuTime()
	n := 0
	for b.Loop() {
		n++
		v, err := regions.Read(ctx, hub.JS, now, testenv.Quiet())
		if err != nil || len(v.Regions) != regionCount || v.Totals.Counts[domain.StateNone] != per/2*regionCount*shards {
			b.Fatalf("view of %d regions, %v", len(v.Regions), err)
		}
	}
	// The process's CPU (the embedded hub server and the reader both) per read.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(n), "cpu-µs/read")
	b.ReportMetric(float64(size), "bytes/part")
	b.ReportMetric(float64(size*regionCount*shards), "bytes/tick")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
