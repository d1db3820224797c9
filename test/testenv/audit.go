package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/store"
)

// AuditInput says which commands an audit looks at and what else is known of them.
type AuditInput struct {
	// Ours selects the commands of the load by id (the commands stream may hold others).
	Ours func(id string) bool
	// Acked are the ids whose publisher got a PubAck: each must be stored.
	Acked map[string]bool
	// Writes, if set, are the bucket's writes (BucketWrites): command id → the KV stream
	// sequences of the writes whose record names it as the last applied command. A command
	// written more than once was applied more than once (its second event has the same
	// Nats-Msg-Id and is dropped by the events stream, so only the writes show it). It is
	// called once every outcome is in.
	Writes func() map[string][]uint64
	// Wait bounds how long the audit waits for the last outcomes.
	Wait time.Duration
}

// Audit is what became of the commands of a load, read from the commands and events streams
// and the bucket.
type Audit struct {
	Counts
	Stored      int      // commands of the load in the commands stream
	AckedMissed []string // acknowledged but not in the commands stream
	NoOutcome   []string // stored, without an outcome event
	Doubled     []string // more than one outcome event, or applied more than once
	DoubledSeqs []uint64 // their sequences in the commands stream
	Mismatches  []string // outcomes or records that differ from the sequential model
	// MaxOutcomeStall is the longest a stored command waited for its outcome (stream
	// timestamps of the command and of its first event), and StallID that command.
	MaxOutcomeStall time.Duration
	StallID         string

	stored map[string]bool
}

// IsStored reports whether the command is in the commands stream.
func (a Audit) IsStored(id string) bool { return a.stored[id] }

// Doubles is the number of commands with more than one effect or outcome.
func (a Audit) Doubles() int { return len(a.Doubled) }

// RunAudit waits (up to in.Wait) until every stored command of the load has an outcome,
// then checks that each has exactly one terminal outcome, was applied at most once, and that
// every entity's outcomes and final record equal a sequential application of its stored
// commands, in stored order, through the pure state machine (dead-lettered commands are not
// applied). Lost counts acknowledged commands that were not stored and stored commands
// without an outcome.
func RunAudit(t testing.TB, js jetstream.JetStream, in AuditInput) Audit {
	t.Helper()
	var a Audit
	type stored struct {
		cmd domain.Command
		key string
		seq uint64
		at  time.Time
	}
	var cmds []stored
	isStored := map[string]bool{}
	ReadStream(t, js, domain.CommandsStream, func(m jetstream.Msg) {
		var c domain.Command
		if json.Unmarshal(m.Data(), &c) != nil || !in.Ours(c.ID) {
			return
		}
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, stored{cmd: c, key: domain.KeyFromSubject(m.Subject()), seq: md.Sequence.Stream, at: md.Timestamp})
		isStored[c.ID] = true
	})
	a.Stored = len(cmds)
	a.stored = isStored
	a.Sent = len(cmds)
	for id := range in.Acked {
		if !isStored[id] {
			a.AckedMissed = append(a.AckedMissed, id)
		}
	}
	sort.Strings(a.AckedMissed)

	type event struct {
		ev    domain.Event
		msgID string
		at    time.Time
	}
	var byID map[string][]event
	deadline := time.Now().Add(in.Wait)
	for {
		byID = map[string][]event{}
		ReadEntityEvents(t, js, func(m jetstream.Msg) {
			ev, err := domain.DecodeEvent(m.Data())
			if err != nil || !in.Ours(ev.CommandID) {
				return
			}
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			byID[ev.CommandID] = append(byID[ev.CommandID], event{ev: ev, msgID: m.Headers().Get(domain.HeaderMsgID), at: md.Timestamp})
		})
		missing := 0
		for _, c := range cmds {
			if len(byID[c.cmd.ID]) == 0 {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, c := range cmds {
		if len(byID[c.cmd.ID]) == 0 {
			a.NoOutcome = append(a.NoOutcome, c.cmd.ID)
		}
	}
	a.Lost = len(a.NoOutcome) + len(a.AckedMissed)

	doubled := map[string]string{}
	for id, list := range byID {
		switch list[0].ev.Outcome {
		case domain.OutcomeApplied:
			a.Applied++
		case domain.OutcomeRejected:
			a.Rejected++
		case domain.OutcomeDeadLettered:
			a.DeadLettered++
		case domain.OutcomeDuplicate:
			a.Duplicate++
		}
		if len(list) > 1 {
			a.MultipleOutcomes++
			var desc []string
			for _, e := range list {
				desc = append(desc, fmt.Sprintf("%s %s->%s (Nats-Msg-Id %s, commandSeq %d, revision %d, at %s)", e.ev.Outcome, e.ev.From, e.ev.To, e.msgID, e.ev.CommandSeq, e.ev.Revision, e.at.Format("15:04:05.000")))
			}
			doubled[id] = fmt.Sprintf("%d outcome events: %v", len(list), desc)
		}
	}
	var writes map[string][]uint64
	if in.Writes != nil {
		writes = in.Writes()
	}
	for id, seqs := range writes {
		if !in.Ours(id) {
			continue
		}
		first := byID[id]
		switch {
		case len(seqs) > 1:
			doubled[id] += fmt.Sprintf(" written %d times (KV sequences %v)", len(seqs), seqs)
		case len(first) > 0 && first[0].ev.Outcome != domain.OutcomeApplied:
			doubled[id] += fmt.Sprintf(" written (KV sequence %v) though its outcome is %s", seqs, first[0].ev.Outcome)
		}
	}
	seqOf := map[string]uint64{}
	for _, c := range cmds {
		seqOf[c.cmd.ID] = c.seq
	}
	for id, why := range doubled {
		a.Doubled = append(a.Doubled, fmt.Sprintf("%s (seq %d): %s", id, seqOf[id], why))
		a.DoubledSeqs = append(a.DoubledSeqs, seqOf[id])
	}
	if in.Writes != nil {
		// An applied outcome says the record was written.
		for id, list := range byID {
			if list[0].ev.Outcome == domain.OutcomeApplied && len(writes[id]) == 0 {
				a.Mismatches = append(a.Mismatches, fmt.Sprintf("%s (seq %d): outcome applied, but no record write names it", id, seqOf[id]))
			}
		}
	}
	sort.Strings(a.Doubled)

	for _, c := range cmds {
		if l := byID[c.cmd.ID]; len(l) > 0 {
			if d := l[0].at.Sub(c.at); d > a.MaxOutcomeStall {
				a.MaxOutcomeStall, a.StallID = d, c.cmd.ID
			}
		}
	}

	// The sequential model, per entity in stored order.
	byKey := map[string][]stored{}
	var keys []string
	for _, c := range cmds {
		if byKey[c.key] == nil {
			keys = append(keys, c.key)
		}
		byKey[c.key] = append(byKey[c.key], c)
	}
	sort.Strings(keys)
	st, err := store.Open(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		model := domain.Record{State: domain.StateNone}
		for _, sc := range byKey[key] {
			c := sc.cmd
			list := byID[c.ID]
			if len(list) == 0 {
				continue
			}
			got := list[0].ev
			if got.Outcome == domain.OutcomeDeadLettered {
				continue
			}
			next, tr, rej := domain.Apply(model, c, time.Now())
			switch {
			case rej != nil && (got.Outcome != domain.OutcomeRejected || got.Code != rej.Code || got.From != model.State):
				a.Mismatches = append(a.Mismatches, fmt.Sprintf("%s: %s (seq %d): outcome %s %s from %s, model says rejected %s in %s", key, c.ID, sc.seq, got.Outcome, got.Code, got.From, rej.Code, model.State))
			case rej == nil && (got.Outcome != domain.OutcomeApplied || got.From != tr.From || got.To != tr.To):
				a.Mismatches = append(a.Mismatches, fmt.Sprintf("%s: %s (seq %d): outcome %s %s %s->%s, model says applied %s->%s", key, c.ID, sc.seq, got.Outcome, got.Code, got.From, got.To, tr.From, tr.To))
			}
			if rej == nil {
				model = next
			}
		}
		rec, _, err := st.Get(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != model.State || rec.Updating != model.Updating || rec.Task != model.Task || rec.LastError != model.LastError || rec.Reason != model.Reason {
			a.Mismatches = append(a.Mismatches, fmt.Sprintf("%s: final record %s updating=%t task=%q lastError=%q reason=%q, model %s updating=%t task=%q lastError=%q reason=%q",
				key, rec.State, rec.Updating, rec.Task, rec.LastError, rec.Reason, model.State, model.Updating, model.Task, model.LastError, model.Reason))
		}
	}
	return a
}

// KeepBucketHistory makes the bucket keep every revision of every key (it keeps one), so
// that an audit can tell from the bucket's stream how often each command was written: a
// command applied twice writes twice, while its second event carries the same Nats-Msg-Id
// and is dropped by the events stream. The functions read only the latest revision, and the
// compare-and-swap checks only the latest, so this changes retention, not behaviour.
func KeepBucketHistory(ctx context.Context, js jetstream.JetStream) error {
	return UpdateRecordsStreams(ctx, js, func(cfg *jetstream.StreamConfig) {
		// Not -1 (unlimited): a bucket's clients refuse a stream without a positive limit.
		cfg.MaxMsgsPerSubject = 1 << 30
	})
}

// UpdateRecordsStreams changes the configuration of every cell's records stream with change.
func UpdateRecordsStreams(ctx context.Context, js jetstream.JetStream, change func(*jetstream.StreamConfig)) error {
	for _, c := range domain.AllCells() {
		s, err := js.Stream(ctx, c.RecordsStream())
		if err != nil {
			return err
		}
		cfg := s.CachedInfo().Config
		change(&cfg)
		if _, err = js.UpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("update %s: %w", c.RecordsStream(), err)
		}
	}
	return nil
}

// BucketWrites reads the bucket's stream (kept whole by KeepBucketHistory) and returns, per
// command id named as a record's last applied command, the KV stream sequences of those
// writes.
func BucketWrites(t testing.TB, js jetstream.JetStream) map[string][]uint64 {
	t.Helper()
	out := map[string][]uint64{}
	for _, c := range domain.AllCells() {
		ReadStream(t, js, c.RecordsStream(), func(m jetstream.Msg) {
			var r domain.Record
			md, err := m.Metadata()
			// A fence (a refusal written on a redelivery) keeps the last applied command's id: it
			// is no write of that command.
			if err != nil || json.Unmarshal(m.Data(), &r) != nil || r.LastCommandID == "" || r.Fence != nil {
				return
			}
			out[r.LastCommandID] = append(out[r.LastCommandID], md.Sequence.Stream)
		})
	}
	return out
}
