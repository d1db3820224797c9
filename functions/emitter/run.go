package emitter

import (
	"context"
	"fmt"
	"sync"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/store"
	"maintsignals/shared/telemetry"
)

// exporters is how many requests of a run are compressed and sent at once: the sweep builds
// the next batches on one core while up to this many are encoded on the others.
const exporters = 2

// shardRun is one shard's part of a run.
type shardRun struct {
	shard domain.Shard
	b     *batcher
	em    *telemetry.Emission
	// seen counts the shard's records the sweep met; dropped and corrupt, those it did not
	// emit; sent, the entities whose request was exported.
	seen, dropped, corrupt, sent, requests int
	last, failed                           bool // its last request went out; a request of it failed
}

// run is one run of one or more shards: a sweep of the bucket feeding the shards' batchers,
// and exporters sending their requests while the sweep goes on.
type run struct {
	e      *Emitter
	ctx    context.Context
	cancel context.CancelFunc
	shards []*shardRun
	index  []int // shard number (of the run's count) -> position in shards, -1 if not run
	of     int
	out    chan *batch
	wg     sync.WaitGroup

	// Of the sweep, written by it alone.
	stats   store.SweepStats
	ord     int    // entities met
	lastPos uint64 // sweep position of the last entity met
	cells   []domain.Cell
	scanErr error

	mu        sync.Mutex
	exportErr error
	unsent    *place // the earliest entity (in sweep order) whose points were not sent
}

func (e *Emitter) newRun(ctx context.Context, cancel context.CancelFunc, now time.Time, shards []domain.Shard) *run {
	r := &run{e: e, ctx: ctx, cancel: cancel, out: make(chan *batch, exporters), of: shards[0].Of, cells: domain.CellsOf(shards)}
	// Shards read while provisioning changed their count may differ: the run splits by the
	// first one's count, and a shard out of it meets no entity.
	n := r.of
	for _, sh := range shards {
		n = max(n, sh.Index+1)
	}
	r.index = make([]int, n)
	for i := range r.index {
		r.index[i] = -1
	}
	for i, sh := range shards {
		if r.index[sh.Index] < 0 {
			r.index[sh.Index] = i
		}
		r.shards = append(r.shards, &shardRun{
			shard: sh,
			b:     newBatcher(i, sh, now, e.cfg, e.getBatch),
			em:    e.tel.NewEmission(sh.String(), e.cfg.stale()),
		})
	}
	for range exporters {
		r.wg.Add(1)
		go r.export()
	}
	return r
}

// holds reports whether a key (of KeyHash h) belongs to one of the run's shards.
func (r *run) holds(_ string, h uint64) bool { return r.index[r.shardOf(h)] >= 0 }

// shardOf is the shard number, of the run's count, of a key of KeyHash h.
func (r *run) shardOf(h uint64) int {
	if r.of <= 1 {
		return 0
	}
	return int(h % uint64(r.of))
}

// sweep reads the bucket from position from, then sends each shard's last request, and waits
// for the exporters.
func (r *run) sweep(from uint64) {
	r.stats, r.scanErr = r.e.store.Sweep(r.ctx, r.cells, from, r.holds, r.entry)
	if r.scanErr == nil {
		end := place{ord: r.ord + 1}
		for _, sr := range r.shards {
			if r.scanErr = r.send(sr.b.finish(end)); r.scanErr != nil {
				break
			}
		}
	} else {
		// What the sweep did not reach starts the next run.
		r.markUnsent(place{ord: r.ord + 1, rev: r.lastPos + 1})
	}
	close(r.out)
	r.wg.Wait()
	for _, sr := range r.shards {
		if c := sr.b.cur; c != nil { // built, never sent
			r.markUnsent(c.first)
			sr.failed = true
			r.e.putBatch(c)
		}
	}
}

// entry is the sweep's callback for one record of the run's shards.
func (r *run) entry(en store.Entry, derr error) error {
	r.ord++
	r.lastPos = en.Position
	sr := r.shards[r.index[r.shardOf(en.Hash)]]
	sr.seen++
	si := stateIndex(en.Record.State)
	if derr != nil || si < 0 {
		sr.corrupt++
		r.e.log.Warn("record skipped: cannot be read", "key", en.Key, "state", string(en.Record.State), "err", derr)
		return nil
	}
	if !emitted(en.Record, sr.b.now, r.e.cfg.Retention) {
		sr.dropped++
		if !en.Record.Forgotten() {
			// In None past the retention: out of the status points, still an entity in None
			// for the fleet view, as list and the web view count it (one definition).
			sr.b.byState[si]++
		}
		return nil
	}
	id := en.Record.ResourceID
	if id == "" {
		// A record always carries its ID; the key still names the entity if one does not.
		id, _ = domain.DecodeKey(en.Key)
	}
	if why, _, _ := r.e.policies.Conflict(en.Key, en.Record, sr.b.now); why != "" {
		sr.b.conflict()
	}
	if full := sr.b.add(id, si, en.Record, place{ord: r.ord, rev: en.Position}); full != nil {
		return r.send(full)
	}
	return nil
}

// send hands a full batch to the exporters.
func (r *run) send(b *batch) error {
	select {
	case r.out <- b:
		return nil
	case <-r.ctx.Done():
		r.drop(b)
		return r.ctx.Err()
	}
}

// export sends batches until the sweep is over. After a failure it only drops what comes:
// the run has failed, and the first failure cancelled it.
func (r *run) export() {
	defer r.wg.Done()
	for b := range r.out {
		r.mu.Lock()
		failed := r.exportErr != nil
		r.mu.Unlock()
		if failed || r.ctx.Err() != nil {
			r.drop(b)
			continue
		}
		sr := r.shards[b.shard]
		if err := sr.em.Export(r.ctx, b.seal()); err != nil {
			r.mu.Lock()
			if r.exportErr == nil {
				r.exportErr = err
			}
			r.mu.Unlock()
			r.cancel() // stop the sweep: this run has failed
			r.drop(b)
			continue
		}
		r.mu.Lock()
		sr.sent += b.entities
		sr.requests++
		sr.last = sr.last || b.last
		r.mu.Unlock()
		r.e.putBatch(b)
	}
}

// drop gives up a batch that was not sent.
func (r *run) drop(b *batch) {
	r.mu.Lock()
	r.shards[b.shard].failed = true
	r.mu.Unlock()
	r.markUnsent(b.first)
	r.e.putBatch(b)
}

func (r *run) markUnsent(p place) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unsent == nil || p.ord < r.unsent.ord {
		r.unsent = &p
	}
}

// stoppedAt is where the next run should start: the first entity this one did not send, if
// it did not send everything and knows where that entity is.
func (r *run) stoppedAt() (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unsent == nil || r.unsent.rev == 0 {
		return 0, false
	}
	return r.unsent.rev, true
}

// results is one result per shard, in the order of the run's shards; a shard's emission is
// committed (the Prometheus page shows it) only when all of it was sent.
func (r *run) results(d time.Duration) []Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Result, len(r.shards))
	for i, sr := range r.shards {
		res := Result{
			Shard: sr.shard, Entities: sr.b.entities, Points: sr.b.points, Requests: sr.requests,
			ByState: sr.b.byState, Dropped: sr.dropped, Corrupt: sr.corrupt, Duration: d, Coverage: 1,
		}
		switch {
		case r.exportErr != nil:
			res.Err = fmt.Errorf("emitter: %w: %w", ErrExport, r.exportErr)
		case r.scanErr != nil:
			res.Err = fmt.Errorf("emitter: %w: %w", ErrScan, r.scanErr)
		case sr.failed || !sr.last:
			res.Err = fmt.Errorf("emitter: %w: not every request of the shard was sent", ErrExport)
		}
		if res.Err != nil {
			sr.em.Abort()
			res.Coverage = r.coverage(sr)
		} else {
			sr.em.Commit()
		}
		out[i] = res
	}
	return out
}

// coverage estimates the share of a shard's records that a run which stopped short handled:
// those it sent or rightly left out, over those it met plus its share of the records it never
// reached.
func (r *run) coverage(sr *shardRun) float64 {
	handled := float64(sr.sent + sr.dropped + sr.corrupt)
	if r.stats.Read == 0 {
		return 0
	}
	total := float64(sr.seen) + float64(r.stats.Total-r.stats.Read)*float64(sr.seen)/float64(r.stats.Read)
	if total <= 0 {
		return 0
	}
	return min(handled/total, 1)
}
