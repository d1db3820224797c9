package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// A sweep reads the bucket like Scan, for the keys of a share (a shard), and may start
// anywhere: a run that could not finish starts the next one where it stopped, so that the
// records left out are not always the same. It relies on the bucket keeping one revision per
// key (History 1, as provisioned): the bucket's stream then holds exactly the current
// records, so reading it from any sequence and wrapping around reads each record once.

// SweepStats says how much of the bucket a sweep read.
type SweepStats struct {
	// Total is the messages of the bucket's stream when the sweep started (current records
	// and the markers of deleted keys); Read, how many of them the sweep read, of every key.
	Total, Read int
	// Crowded are the cells that held more interior deletes than records when the sweep
	// started: those Compact has work in.
	Crowded []domain.Cell
	// LastSeq is each cell's last sequence when the sweep started: its records' revision.
	LastSeq map[domain.Cell]uint64
}

// Position is where a sweep meets a record: its cell and its sequence in the cell's bucket,
// ordered cell by cell. The zero Position is the start of the first cell.
func Position(c domain.Cell, seq uint64) uint64 { return uint64(c)<<56 | seq }

func positionCell(p uint64) (domain.Cell, uint64) { return domain.Cell(p >> 56), p & (1<<56 - 1) }

// Sweep calls fn once for the current record of every key of the cells given that keep
// accepts (nil: every key; it is given the key and its domain.KeyHash, which shards are made
// of), in one streaming pass over their buckets as they are when the sweep reaches them:
// from Position from to the end of its cell, the other cells in order, then the start of
// from's cell up to from (from 0 or out of range: from the start of the first cell).
// Records of other keys are not decoded, and of the others only the summary
// (domain.DecodeRecordSummary: the state and its times, not the history). A record written
// during the sweep is seen once, as it was either when the sweep read it or after. A value
// that does not decode reaches fn with an error wrapping ErrCorruptRecord; fn's error stops
// the sweep. Entry.Position is a position to sweep from next time; Entry.Stored, when the
// record was stored.
//
// It relies on the buckets keeping one revision per key (History 1, as provisioned).
func (s *Store) Sweep(ctx context.Context, cells []domain.Cell, from uint64, keep func(key string, hash uint64) bool, fn func(Entry, error) error) (SweepStats, error) {
	var st SweepStats
	if len(cells) == 0 {
		return st, nil
	}
	fromCell, fromSeq := positionCell(from)
	start := slices.Index(cells, fromCell)
	if start < 0 {
		start, fromSeq = 0, 0
	}
	infos, err := s.cellInfos(ctx, cells)
	if err != nil {
		return st, err
	}
	st.atStart(cells, infos)
	sw := &sweep{s: s, keep: keep, fn: fn, stats: &st, infos: infos}
	read := func(c domain.Cell, lo, hi uint64) error { return sw.readPart(ctx, c, lo, hi) }
	c0 := cells[start]
	if info := infos[c0]; fromSeq <= info.State.FirstSeq || fromSeq > info.State.LastSeq {
		fromSeq = 0
	}
	// From where the last run stopped to the end of its cell, the other cells, then the
	// records of the first cell before it.
	if err := read(c0, fromSeq, 0); err != nil {
		return st, err
	}
	for i := 1; i < len(cells); i++ {
		if err := read(cells[(start+i)%len(cells)], 0, 0); err != nil {
			return st, err
		}
	}
	if fromSeq > 0 {
		if err := read(c0, 0, fromSeq); err != nil {
			return st, err
		}
	}
	// Records written since the start: those of keys already read were read as they were
	// then; the others' earlier revisions were replaced before the sweep reached them.
	slices.Sort(sw.seen)
	now, err := s.cellInfos(ctx, cells)
	if err != nil {
		return st, err
	}
	for _, c := range cells {
		if now[c].State.LastSeq == infos[c].State.LastSeq {
			continue // nothing written since: no consumer to make
		}
		if err := sw.read(ctx, c, infos[c].State.LastSeq+1, func(uint64) bool { return true }, true); err != nil {
			return st, err
		}
	}
	return st, nil
}

// atStart notes the cells' state as the sweep starts.
func (st *SweepStats) atStart(cells []domain.Cell, infos map[domain.Cell]*jetstream.StreamInfo) {
	st.LastSeq = make(map[domain.Cell]uint64, len(cells))
	for _, c := range cells {
		state := infos[c].State
		st.LastSeq[c] = state.LastSeq
		st.Total += int(state.Msgs)
		if state.Msgs > 0 && state.LastSeq-state.FirstSeq+1-state.Msgs > state.Msgs {
			st.Crowded = append(st.Crowded, c)
		}
	}
}

// cellInfos reads the state of the cells' buckets.
func (s *Store) cellInfos(ctx context.Context, cells []domain.Cell) (map[domain.Cell]*jetstream.StreamInfo, error) {
	infos := map[domain.Cell]*jetstream.StreamInfo{}
	for _, c := range cells {
		stream, err := s.js.Stream(ctx, c.RecordsStream())
		if err != nil {
			return nil, fmt.Errorf("sweep %s: %w", c.RecordsBucket(), err)
		}
		infos[c] = stream.CachedInfo()
	}
	return infos, nil
}

// readPart reads the cell's records of sequences lo ≤ seq < hi as the cell was when the sweep
// started (hi 0: to its end then).
func (sw *sweep) readPart(ctx context.Context, c domain.Cell, lo, hi uint64) error {
	info := sw.infos[c]
	if info.State.Msgs == 0 {
		return nil
	}
	if last := info.State.LastSeq; hi == 0 || hi > last+1 {
		hi = last + 1
	}
	lo = max(lo, info.State.FirstSeq)
	if lo >= hi {
		return nil
	}
	return sw.read(ctx, c, lo, func(seq uint64) bool { return seq < hi }, false)
}

// sweep is one Sweep under way.
type sweep struct {
	s     *Store
	infos map[domain.Cell]*jetstream.StreamInfo
	keep  func(string, uint64) bool
	fn    func(Entry, error) error
	stats *SweepStats
	seen  []uint64            // hashes of the keys read before the tail, sorted for the tail
	late  map[uint64]struct{} // hashes of the keys read in the tail
}

// read delivers the records from stream sequence start while within holds, or until the
// stream has nothing more. In the tail, it skips keys already read.
func (sw *sweep) read(ctx context.Context, c domain.Cell, start uint64, within func(uint64) bool, tail bool) error {
	cons, err := sw.s.js.OrderedConsumer(ctx, c.RecordsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"$KV." + c.RecordsBucket() + ".>"},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    start,
	})
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if info := cons.CachedInfo(); info == nil || info.NumPending == 0 {
		return nil
	}
	// A callback rather than an iterator: the iterator's Next costs a timer and a select per
	// message, about a third of reading a record another share holds.
	defer func() {
		_ = sw.s.js.DeleteConsumer(context.WithoutCancel(ctx), c.RecordsStream(), cons.CachedInfo().Name)
	}()
	h := &readHandler{ctx: ctx, sw: sw, cell: c, within: within, tail: tail, done: make(chan error, 1)}
	cc, err := cons.Consume(h.handle, jetstream.PullMaxMessages(4096), jetstream.ConsumeErrHandler(h.failed))
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	select {
	case err = <-h.done:
	case <-ctx.Done():
		err = fmt.Errorf("sweep: %w", ctx.Err())
	}
	cc.Stop()
	h.stop() // waits for a message being handled: the sweep is the caller's again
	return err
}

// readHandler hands the messages of one read to the sweep until the read is over.
type readHandler struct {
	ctx    context.Context
	sw     *sweep
	cell   domain.Cell
	within func(uint64) bool
	tail   bool
	done   chan error

	mu      sync.Mutex
	stopped bool
}

func (h *readHandler) handle(msg jetstream.Msg) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	if err := h.ctx.Err(); err != nil {
		h.finish(fmt.Errorf("sweep: %w", err))
		return
	}
	md, err := msg.Metadata()
	if err != nil {
		h.finish(fmt.Errorf("sweep: %w", err))
		return
	}
	if !h.within(md.Sequence.Stream) {
		h.finish(nil)
		return
	}
	if !h.tail {
		h.sw.stats.Read++
	}
	if err := h.sw.deliver(h.cell, msg, md, h.tail); err != nil {
		h.finish(err)
		return
	}
	if md.NumPending == 0 {
		h.finish(nil)
	}
}

// failed ends the read on an error the ordered consumer does not recover from by itself
// (it makes a new consumer after missed heartbeats, a gap or a deleted consumer).
func (h *readHandler) failed(_ jetstream.ConsumeContext, err error) {
	if errors.Is(err, jetstream.ErrConnectionClosed) || errors.Is(err, jetstream.ErrOrderedConsumerReset) ||
		errors.Is(err, jetstream.ErrConsumerNotFound) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if !h.stopped {
			h.finish(fmt.Errorf("sweep: %w", err))
		}
	}
}

// finish ends the read with err (nil: read to its end); h.mu is held.
func (h *readHandler) finish(err error) {
	h.stopped = true
	h.done <- err
}

func (h *readHandler) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
}

// deliver hands one message to fn, unless it is a deleted key's marker, a key of another
// share, or (in the tail) a key already read.
func (sw *sweep) deliver(c domain.Cell, msg jetstream.Msg, md *jetstream.MsgMetadata, tail bool) error {
	if Deleted(msg) {
		return nil
	}
	key := domain.KeyFromSubject(msg.Subject())
	h := domain.KeyHash(key)
	if sw.keep != nil && !sw.keep(key, h) {
		return nil
	}
	if tail {
		if _, found := slices.BinarySearch(sw.seen, h); found {
			return nil
		}
		if _, dup := sw.late[h]; dup {
			return nil
		}
		if sw.late == nil {
			sw.late = map[uint64]struct{}{}
		}
		sw.late[h] = struct{}{}
	} else {
		sw.seen = append(sw.seen, h)
	}
	e := Entry{Key: key, Hash: h, Revision: md.Sequence.Stream, Position: Position(c, md.Sequence.Stream), Stored: md.Timestamp}
	var derr error
	if e.Record, derr = domain.DecodeRecordSummary(msg.Data()); derr != nil {
		derr = fmt.Errorf("%w %s: %w", ErrCorruptRecord, key, derr)
	}
	return sw.fn(e, derr)
}
