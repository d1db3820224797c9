package emitter

import (
	"cmp"
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// summaryTimeout bounds the publication of a run's summary parts: the stream is local.
const summaryTimeout = 5 * time.Second

// summarize publishes, in a region, each shard's part of the region's summary for the tick at:
// the counts the run made for its fleet gauges, so that the hub's view and the region's
// `maintctl list` count alike and the bucket is read once. A run whose sweep did not reach
// the end has no complete counts and publishes nothing; the hub then sees the region age.
func (e *Emitter) summarize(ctx context.Context, at time.Time, r *run) {
	if e.cfg.Region == "" || r.scanErr != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, summaryTimeout)
	defer cancel()
	for _, sr := range r.shards {
		s := e.summaryOf(at, sr, r.stats.LastSeq)
		body, err := json.Marshal(s)
		if err != nil {
			e.log.Error("summary not encoded", "err", err)
			return
		}
		subj := domain.SummarySubject(e.cfg.Region, sr.shard)
		_, err = e.js.Publish(ctx, subj, body, jetstream.WithMsgID(domain.SummaryMsgID(e.cfg.Region, sr.shard, at)))
		if err != nil {
			// The next tick publishes the region's state as it is then.
			e.log.Warn("summary not published; the hub sees this region age until the next tick", "shard", sr.shard.Index, "err", err)
		}
	}
}

// summaryOf is a shard's part of the summary of the tick at; lastSeq are the cells' last
// sequences when the sweep began.
func (e *Emitter) summaryOf(at time.Time, sr *shardRun, lastSeq map[domain.Cell]uint64) domain.Summary {
	s := domain.Summary{
		Version: domain.SummaryVersion, Region: e.cfg.Region, Shard: sr.shard.Index, Shards: max(sr.shard.Of, 1),
		At: at.UTC(), TickSeconds: cmp.Or(e.cfg.Tick, time.Minute).Seconds(),
		Counts:   make(map[domain.State]int64, len(domain.States)),
		Updating: sr.b.updating, Overdue: sr.b.overdue, Stuck: sr.b.stuck, Conflicts: sr.b.conflicts,
	}
	for i, st := range domain.States {
		s.Counts[st] = sr.b.byState[i]
	}
	for _, c := range sr.shard.Cells() {
		s.Revision += lastSeq[c]
	}
	return s
}
