// Package command is the command function: it applies admin and outcome commands to the
// transition table, keeps the result in the bucket with optimistic concurrency and publishes
// exactly one outcome event per command.
package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/runtime"
	"maintsignals/shared/signing"
	"maintsignals/shared/store"
)

// Records is the part of the store the handler uses.
type Records interface {
	Get(ctx context.Context, key string) (domain.Record, uint64, error)
	Put(ctx context.Context, key string, r domain.Record, rev uint64) (uint64, error)
}

// Publisher publishes outcome events.
type Publisher interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// Deps are the handler's dependencies.
type Deps struct {
	Records Records
	Events  Publisher
	Metrics *Metrics
	Log     *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Auth checks command signatures; nil accepts every command unsigned.
	Auth *signing.Policy
	// Limit admits commands per entity; nil admits all.
	Limit *Limiter
	// Answered finds the last outcome event of an entity, so that a redelivered command that
	// already has its outcome is not judged again; nil skips the check.
	Answered Answered
	// Cache remembers records this replica wrote; nil reads every record from the bucket.
	Cache *Cache
	// MinNotice refuses a Pending announced with less notice (domain.CheckNotice); 0: none.
	MinNotice time.Duration
}

// Answered looks up the last outcome event published for an entity key.
type Answered interface {
	LastEvent(ctx context.Context, key string) (domain.Event, bool, error)
}

// maxConflicts bounds re-read-and-re-apply rounds on revision conflicts. With one consumer per
// partition a conflict means a concurrent redelivery of the same command, so one more round
// settles it; the bound only stops a pathological loop.
const maxConflicts = 5

// Handle applies one command message. It returns nil when the command has its outcome (applied,
// rejected or duplicate) published, and an error when the work must be retried.
func Handle(ctx context.Context, d Deps, msg runtime.Message) error {
	now := d.clock()
	key := domain.KeyFromSubject(msg.Subject)
	msgID := msg.Header.Get(domain.HeaderMsgID)
	cmd, rej := d.decode(msg, key, msgID)
	if rej != nil {
		if cmd.ID == "" {
			cmd.ID = msgID
		}
		return d.reject(ctx, key, msg, cmd, rej, now().UTC())
	}
	if rej := domain.CheckNotice(cmd, msg.Time, d.MinNotice); rej != nil {
		return d.reject(ctx, key, msg, cmd, rej, now().UTC())
	}
	if msg.Delivered > 1 && d.Answered != nil {
		// Events of an entity are published in command order: if the last one answers this
		// command, it was handled and only the ack was lost.
		last, ok, err := d.Answered.LastEvent(ctx, key)
		if err != nil {
			return fmt.Errorf("read last outcome: %w", err)
		}
		if ok && last.CommandSeq == msg.Seq && last.CommandID == cmd.ID {
			d.log().Info("redelivered command already has its outcome", "key", key, "command_id", cmd.ID, "outcome", last.Outcome)
			return nil
		}
	}
	if msg.Delivered == 1 {
		// Only a first delivery is rate limited: a retry of an admitted command stays admitted.
		if rej := d.Limit.Admit(key, now()); rej != nil {
			return d.reject(ctx, key, msg, cmd, rej, now().UTC())
		}
	}
	// A first delivery may start from the record this replica wrote last (see Cache); a
	// redelivery, a conflict or any outcome but applied reads the bucket.
	fresh := msg.Delivered > 1
	for range maxConflicts {
		rec, rev, guessed := d.Cache.get(key)
		if fresh || !guessed {
			var err error
			if rec, rev, err = d.Records.Get(ctx, key); err != nil {
				return readError(err)
			}
			guessed = false
		}
		if guessed && !appliesOn(rec, cmd, msg.Seq) {
			fresh = true
			continue
		}
		// A redelivery of the command that was applied last: the write happened, the event may
		// not have. Publish the very same event again; the events stream keeps one copy.
		if appliedLast(rec, cmd.ID, msg.Seq) {
			d.log().Info("redelivered command already applied; republishing its outcome", "key", key, "command_id", cmd.ID)
			return d.republish(ctx, key, rec, rev)
		}
		// Commands of an entity are handled in stream order, so an older one was handled
		// already and its outcome published before it was acked: a consumer that redelivers it
		// (after a leader change) must not have it judged again against a newer state. A first
		// delivery with a lower sequence, or a later stored time, means the stream was
		// recreated: handle it.
		if msg.Delivered > 1 && msg.Seq < rec.LastCommandSeq && !msg.Time.After(rec.LastCommandAt) {
			d.log().Info("stale redelivery of a command handled before; nothing to do", "key", key, "command_id", cmd.ID, "seq", msg.Seq, "last_seq", rec.LastCommandSeq)
			return nil
		}
		if rec.Seen(cmd.ID) {
			ev := domain.Event{
				CommandID: cmd.ID, ResourceID: cmd.ResourceID, Task: cmd.Task, Outcome: domain.OutcomeDuplicate,
				From: rec.State, To: rec.State, Message: "command id was applied before; nothing changed",
				Revision: rev, At: now().UTC(), Actor: cmd.Actor, Force: cmd.Force, Reason: cmd.Reason, CommandSeq: msg.Seq,
			}
			d.Metrics.command(ctx, domain.OutcomeDuplicate, "")
			return d.publish(ctx, key, eventMsgID(cmd.ID, msg.Seq)+":dup", ev)
		}
		at := now().UTC()
		next, tr, rej := domain.Apply(rec, cmd, at)
		if rej != nil {
			return d.reject(ctx, key, msg, cmd, rej, at)
		}
		ev := domain.Event{
			CommandID: cmd.ID, ResourceID: cmd.ResourceID, Task: cmd.Task, Outcome: domain.OutcomeApplied,
			From: tr.From, To: tr.To, At: at, Actor: cmd.Actor, Force: cmd.Force, Reason: cmd.Reason, Error: cmd.Error, CommandSeq: msg.Seq,
		}
		if tr.Forced {
			ev.Message = "forced: the update in progress was abandoned"
		}
		next.LastCommandID, next.LastCommandSeq, next.LastCommandAt = cmd.ID, msg.Seq, msg.Time
		next.Remember(cmd.ID)
		next.LastEvent = &ev
		newRev, err := d.Records.Put(ctx, key, next, rev)
		if errors.Is(err, store.ErrConflict) {
			d.log().Debug("revision conflict; re-reading", "key", key, "command_id", cmd.ID)
			d.Cache.forget(key)
			fresh = true
			continue
		}
		if err != nil {
			d.Cache.forget(key)
			return fmt.Errorf("write record: %w", err)
		}
		d.Cache.put(key, next, newRev)
		ev.Revision = newRev
		d.Metrics.transition(ctx, tr, cmd.Task)
		d.Metrics.command(ctx, domain.OutcomeApplied, "")
		d.log().Info("command applied", "key", key, "command_id", cmd.ID, "task", cmd.Task, "from", tr.From, "to", tr.To, "outcome", domain.OutcomeApplied, "revision", newRev)
		return d.publish(ctx, key, eventMsgID(cmd.ID, msg.Seq), ev)
	}
	return fmt.Errorf("record of %s kept changing: %w", key, store.ErrConflict)
}

// decode reads and checks a command: its signature over the exact body first (an unauthorized
// sender gets no further), then its content, then whether the signer may send its task. A
// verified signer's configured name replaces the self-declared actor.
func (d Deps) decode(msg runtime.Message, key, msgID string) (domain.Command, *domain.Rejection) {
	var signer *signing.Signer
	if d.Auth != nil && len(msg.Data) <= domain.MaxCommandBytes {
		var rej *domain.Rejection
		if signer, rej = d.Auth.Verify(msg.Data, msg.Header); rej != nil {
			// Best effort, for the outcome event: which command was refused.
			cmd, _ := domain.DecodeCommand(msg.Data, key, msgID)
			cmd.Actor = ""
			return cmd, rej
		}
	}
	cmd, rej := domain.DecodeCommand(msg.Data, key, msgID)
	if rej != nil {
		return cmd, rej
	}
	if d.Auth != nil {
		if rej := d.Auth.Authorize(signer, cmd.Task); rej != nil {
			cmd.Actor = ""
			return cmd, rej
		}
	}
	if signer != nil {
		cmd.Actor = signer.Name
	}
	return cmd, nil
}

// reject publishes a rejection outcome. The record is read only to report its state; a
// rejection never writes it.
func (d Deps) reject(ctx context.Context, key string, msg runtime.Message, cmd domain.Command, rej *domain.Rejection, at time.Time) error {
	state := domain.StateNone
	var rev uint64
	if key != "" {
		rec, r, err := d.Records.Get(ctx, key)
		if err == nil {
			state, rev = rec.State, r
		} else if !errors.Is(err, jetstream.ErrInvalidKey) {
			return readError(err)
		}
	}
	ev := domain.Rejected(cmd, state, rej, at)
	ev.Revision, ev.CommandSeq = rev, msg.Seq
	d.Metrics.command(ctx, domain.OutcomeRejected, rej.Code)
	d.log().Warn("command rejected", "key", key, "command_id", cmd.ID, "task", cmd.Task, "outcome", domain.OutcomeRejected, "code", rej.Code, "target", rej.Target, "message", rej.Message)
	return d.publish(ctx, key, eventMsgID(cmd.ID, msg.Seq), ev)
}

// DeadLetter publishes the outcome of a command the runtime gave up on: dead_lettered, unless
// the record shows the command was applied and only its event failed, in which case the
// applied event is published (an outcome is never replaced by a wrong one).
func DeadLetter(ctx context.Context, d Deps, msg runtime.Message, reason string) error {
	key := domain.KeyFromSubject(msg.Subject)
	cmd, _ := domain.DecodeCommand(msg.Data, key, "")
	if cmd.ID == "" {
		cmd.ID = msg.Header.Get(domain.HeaderMsgID)
	}
	// The record is read if it can be (often it cannot: that is why the command is here). A
	// state that cannot be read is reported as "" rather than guessed.
	var state domain.State
	var rev uint64
	if rec, r, err := d.Records.Get(ctx, key); err == nil {
		if appliedLast(rec, cmd.ID, msg.Seq) {
			return d.republish(ctx, key, rec, r)
		}
		state, rev = rec.State, r
	}
	ev := domain.Event{
		CommandID: cmd.ID, ResourceID: cmd.ResourceID, Task: cmd.Task, Outcome: domain.OutcomeDeadLettered,
		From: state, To: state, Revision: rev,
		Message: reason, At: d.clock()().UTC(), Actor: cmd.Actor, Force: cmd.Force, CommandSeq: msg.Seq,
	}
	d.Metrics.command(ctx, domain.OutcomeDeadLettered, "")
	return d.publish(ctx, key, eventMsgID(cmd.ID, msg.Seq)+":dlq", ev)
}

// appliesOn reports whether cmd, a first delivery at stream sequence seq, would be applied to
// rec: the only outcome decided on a remembered record (the write checks it).
func appliesOn(rec domain.Record, cmd domain.Command, seq uint64) bool {
	if appliedLast(rec, cmd.ID, seq) || rec.Seen(cmd.ID) {
		return false
	}
	_, _, rej := domain.Apply(rec, cmd, time.Time{})
	return rej == nil
}

// appliedLast reports whether the record was last written by this very stored command.
func appliedLast(rec domain.Record, commandID string, seq uint64) bool {
	return rec.LastCommandSeq == seq && rec.LastCommandID == commandID && rec.LastEvent != nil
}

// republish publishes again the outcome of the command that wrote rec at revision rev: the very
// same event under the same id, so the events stream keeps one copy.
func (d Deps) republish(ctx context.Context, key string, rec domain.Record, rev uint64) error {
	ev := *rec.LastEvent
	ev.Revision = rev
	return d.publish(ctx, key, eventMsgID(ev.CommandID, ev.CommandSeq), ev)
}

// readError classifies a failed record read: a record that does not decode will not decode on
// a retry either (dead-letter it with the reason, an operator must repair the record); anything
// else is worth retrying.
func readError(err error) error {
	if errors.Is(err, store.ErrCorruptRecord) {
		return runtime.Permanent(fmt.Errorf("read record: %w", err))
	}
	return fmt.Errorf("read record: %w", err)
}

// eventMsgID is the de-duplication id of a command's outcome event: the command id and its
// stream sequence, the same on every redelivery of that stored command (so the events stream
// keeps one copy) and different for a copy of the command stored again later. A body without a
// readable id is named by its sequence alone.
func eventMsgID(commandID string, seq uint64) string {
	if domain.ValidID(commandID) {
		return commandID + ":" + strconv.FormatUint(seq, 10)
	}
	return "seq-" + strconv.FormatUint(seq, 10)
}

func (d Deps) publish(ctx context.Context, key, msgID string, ev domain.Event) error {
	b, err := domain.EncodeEvent(ev)
	if err != nil {
		return runtime.Permanent(err)
	}
	out := nats.NewMsg(domain.EventSubject(key))
	out.Data = b
	out.Header.Set(domain.HeaderMsgID, msgID)
	if _, err := d.Events.PublishMsg(ctx, out); err != nil {
		return fmt.Errorf("publish outcome event: %w", err)
	}
	return nil
}

func (d Deps) clock() func() time.Time {
	if d.Now == nil {
		return time.Now
	}
	return d.Now
}

func (d Deps) log() *slog.Logger {
	if d.Log == nil {
		return slog.Default()
	}
	return d.Log
}
