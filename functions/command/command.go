// Package command is the command function: it applies admin and outcome commands to the
// transition table, keeps the result in the bucket with optimistic concurrency and publishes
// exactly one outcome event per command.
package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/signing"
	"maintsignals/shared/store"
)

// Records is the part of the store the handler uses.
type Records interface {
	Get(ctx context.Context, key string) (domain.Record, uint64, error)
	Put(ctx context.Context, key string, prev store.Versioned, next domain.Record) (uint64, error)
}

// Publisher publishes outcome events.
type Publisher interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// answers looks up the last outcome event published for an entity key.
type answers interface {
	LastEvent(ctx context.Context, key string) (domain.Event, bool, error)
}

// maxConflicts bounds re-read-and-re-apply rounds on revision conflicts. With one consumer per
// partition a conflict means a concurrent redelivery of the same command, so one more round
// settles it; the bound only stops a pathological loop.
const maxConflicts = 5

// Handle applies one command message: gate (decode, signature), load, decide, commit. It
// returns nil when the command has its outcome (applied, rejected or duplicate) published, and
// an error when the work must be retried.
func (d *Applier) Handle(ctx context.Context, msg function.Message) error {
	key := domain.KeyFromSubject(msg.Subject)
	msgID := msg.Header.Get(domain.HeaderMsgID)
	cmd, rej := d.decode(msg, key, msgID)
	if rej != nil {
		if cmd.ID == "" {
			cmd.ID = msgID
		}
		return d.reject(ctx, key, msg, cmd, rej)
	}
	if done, err := d.answered(ctx, key, cmd, msg); done || err != nil {
		return err
	}
	pol, err := d.policyInForce(ctx, key, cmd, msg.Time)
	if err != nil {
		return err
	}
	// A first delivery may start from the record this replica wrote last (see Cache); a
	// redelivery, a conflict or any outcome but applied reads the bucket.
	fresh := msg.Delivered > 1
	for range maxConflicts {
		cur, remembered, err := d.load(ctx, key, fresh)
		if err != nil {
			return err
		}
		deadline, err := d.deadline(ctx, cur.Record, cmd)
		if err != nil {
			return err
		}
		dl := delivery{Seq: msg.Seq, StoredAt: msg.Time, Remembered: remembered, Redelivered: msg.Delivered > 1, Policy: pol, Deadline: deadline}
		dec := decide(cur.Record, cmd, dl, d.rules, d.now().UTC())
		dec.Event.Revision = cur.Rev
		if done, err := d.act(ctx, key, cmd, msg, cur, dec); done || err != nil {
			return err
		}
		fresh = true
	}
	return fmt.Errorf("record of %s kept changing: %w", key, store.ErrConflict)
}

// act carries out the decision on cur; not done: decide again on a fresh read.
func (d *Applier) act(ctx context.Context, key string, cmd domain.Command, msg function.Message, cur store.Versioned, dec decision) (done bool, err error) {
	log := d.log.With("key", key, "command_id", cmd.ID, "seq", msg.Seq, "action", dec.Action.String())
	switch dec.Action {
	case actReread:
		return false, nil
	case actSkip:
		log.Info("command handled before; nothing to do", "why", dec.Why, "last_seq", cur.Record.LastCommandSeq)
		return true, nil
	case actRepublish:
		log.Info("command handled before; publishing its outcome again", "outcome", dec.Event.Outcome)
		return true, d.publish(ctx, key, outcomeMsgID(dec.Event), dec.Event)
	case actDuplicate:
		d.metrics.command(ctx, domain.OutcomeDuplicate, "")
		return true, d.publish(ctx, key, domain.OutcomeMsgID(cmd.ID, msg.Seq)+":dup", dec.Event)
	case actReject:
		return true, d.refused(ctx, key, dec.Event)
	case actFence:
		return d.fence(ctx, key, cur, dec, false, log)
	}
	return d.commit(ctx, key, cmd, msg, cur, dec, log)
}

// fence writes a refusal's fence over cur and then publishes the refusal; not done: the record
// moved on meanwhile (perhaps by the very commit the fence is for), so decide again. With
// bestEffort (a dead letter), a fence the bucket refuses to write is given up and the refusal
// published without it: a dead letter waiting for a write that keeps failing would hold its
// entity's commands for ever.
func (d *Applier) fence(ctx context.Context, key string, cur store.Versioned, dec decision, bestEffort bool, log *slog.Logger) (done bool, err error) {
	newRev, done, err := d.write(ctx, key, cur, dec.Next, log)
	switch {
	case err != nil && bestEffort && !errors.Is(err, function.ErrLeaseLost) && ctx.Err() == nil:
		log.Warn("refusal published without its fence: the record cannot be written", "outcome", dec.Event.Outcome, "err", err)
		newRev = cur.Rev
	case err != nil || !done:
		return done, err
	default:
		log.Info("refusal of a redelivered command fenced", "outcome", dec.Event.Outcome, "revision", newRev)
	}
	dec.Event.Revision = newRev
	return true, d.refused(ctx, key, dec.Event)
}

// write puts next over cur while this replica still holds the command (one that lost it - cut
// off, its lease run out, its pin moved - leaves it to the replica that has it now) and keeps
// it as this replica's last write; not done: the record moved on meanwhile.
func (d *Applier) write(ctx context.Context, key string, cur store.Versioned, next domain.Record, log *slog.Logger) (rev uint64, done bool, err error) {
	if err := function.Holding(ctx); err != nil {
		return 0, true, err
	}
	rev, err = d.records.Put(ctx, key, cur, next)
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrStale) {
		log.Debug("record moved on; re-reading", "err", err)
		d.cache.forget(key)
		return 0, false, nil
	}
	if err != nil {
		d.cache.forget(key)
		return 0, true, fmt.Errorf("write record: %w", err)
	}
	if next.Forgotten() {
		// A forgotten entity rarely sees another command: its tombstone would only fill the
		// cache (the soak saw the command function's heap grow with every entity forgotten).
		d.cache.forget(key)
	} else {
		d.cache.put(key, next, rev)
	}
	return rev, true, nil
}

// refused publishes a refusal, rejected or dead_lettered, under its outcome's id, while this
// replica still holds the command: one that lost it leaves the outcome to the replica that has
// it now, whose redelivery fences it (a refusal racing that replica's decision could otherwise
// take the outcome's id first).
func (d *Applier) refused(ctx context.Context, key string, ev domain.Event) error {
	if err := function.Holding(ctx); err != nil {
		return err
	}
	d.metrics.command(ctx, ev.Outcome, ev.Code)
	if ev.Outcome == domain.OutcomeRejected {
		d.log.Warn("command rejected", "key", key, "command_id", ev.CommandID, "task", ev.Task, "outcome", ev.Outcome, "code", ev.Code, "target", ev.Target, "message", ev.Message)
	}
	return d.publish(ctx, key, outcomeMsgID(ev), ev)
}

// commit writes an applied decision over cur and publishes its outcome; not done: the record
// moved on meanwhile.
func (d *Applier) commit(ctx context.Context, key string, cmd domain.Command, msg function.Message, cur store.Versioned, dec decision, log *slog.Logger) (done bool, err error) {
	newRev, done, err := d.write(ctx, key, cur, dec.Next, log)
	if !done || err != nil {
		return done, err
	}
	dec.Event.Revision = newRev
	d.metrics.transition(ctx, dec.Transition, cmd.Task)
	d.metrics.command(ctx, domain.OutcomeApplied, "")
	log.Info("command applied", "task", cmd.Task, "from", dec.Transition.From, "to", dec.Transition.To, "outcome", domain.OutcomeApplied, "revision", newRev)
	return true, d.publish(ctx, key, domain.OutcomeMsgID(cmd.ID, msg.Seq), dec.Event)
}

// answered reports whether a redelivered command already has its outcome: events of an entity
// are published in command order, so if the last one answers this command, it was handled and
// only the ack was lost.
func (d *Applier) answered(ctx context.Context, key string, cmd domain.Command, msg function.Message) (bool, error) {
	if msg.Delivered <= 1 || d.answers == nil {
		return false, nil
	}
	last, ok, err := d.answers.LastEvent(ctx, key)
	if err != nil {
		return false, fmt.Errorf("read last outcome: %w", err)
	}
	if ok && last.CommandSeq == msg.Seq && last.CommandID == cmd.ID {
		d.log.Info("redelivered command already has its outcome", "key", key, "command_id", cmd.ID, "outcome", last.Outcome)
		return true, nil
	}
	return false, nil
}

// load returns the record to decide on: the remembered copy of this replica's last write when
// there is one and fresh is false, else the bucket's.
func (d *Applier) load(ctx context.Context, key string, fresh bool) (store.Versioned, bool, error) {
	if !fresh {
		if rec, rev, ok := d.cache.get(key); ok {
			return store.Versioned{Record: rec, Rev: rev}, true, nil
		}
	}
	rec, rev, err := d.records.Get(ctx, key)
	if err != nil {
		return store.Versioned{}, false, readError(err)
	}
	return store.Versioned{Record: rec, Rev: rev}, false, nil
}

// decode reads and checks a command: its signature over the exact body first (an unauthorized
// sender gets no further), then its content, then whether the signer may send its task. A
// verified signer's configured name replaces the self-declared actor.
func (d *Applier) decode(msg function.Message, key, msgID string) (domain.Command, *domain.Rejection) {
	var signer *signing.Signer
	if d.auth != nil && len(msg.Data) <= domain.MaxCommandBytes {
		var rej *domain.Rejection
		if signer, rej = d.auth.Verify(msg.Data, msg.Header); rej != nil {
			// Best effort, for the outcome event: which command was refused.
			cmd, _ := domain.DecodeCommand(msg.Data, key, msgID)
			cmd.Actor = ""
			return cmd, rej
		}
	}
	cmd, rej := domain.DecodeCommand(msg.Data, key, msgID)
	if rej == nil {
		rej = domain.CheckResourceIDPattern(cmd, d.idPattern)
	}
	if rej != nil {
		return cmd, rej
	}
	if d.auth != nil {
		if rej := d.auth.Authorize(signer, cmd); rej != nil {
			cmd.Actor = ""
			return cmd, rej
		}
	}
	if signer != nil {
		cmd.Actor, cmd.SignerKey = signer.Name, signer.Key
	}
	return cmd, nil
}

// reject publishes the rejection of a command refused at the gate (decideRejection). The
// record is read to report its state, to see whether the command was handled already and, on
// a redelivery, to fence the refusal; otherwise a rejection never writes it.
func (d *Applier) reject(ctx context.Context, key string, msg function.Message, cmd domain.Command, rej *domain.Rejection) error {
	return d.refuse(ctx, key, msg, cmd, false, func(rec *domain.Record) decision {
		return decideRejection(rec, cmd, rej, d.delivered(msg), d.now().UTC())
	})
}

// deadLetter publishes the outcome of a command the runtime gave up on (decideDeadLetter).
func (d *Applier) deadLetter(ctx context.Context, msg function.Message, reason string) error {
	key := domain.KeyFromSubject(msg.Subject)
	cmd, _ := domain.DecodeCommand(msg.Data, key, "")
	if cmd.ID == "" {
		cmd.ID = msg.Header.Get(domain.HeaderMsgID)
	}
	// The record is read if it can be (often it cannot: that is why the command is here); one
	// that cannot be read is not fenced, or a bucket out of reach would hold the dead letter
	// for ever.
	return d.refuse(ctx, key, msg, cmd, true, func(rec *domain.Record) decision {
		return decideDeadLetter(rec, cmd, reason, d.delivered(msg), d.now().UTC())
	})
}

// delivered is what a refusal's decision knows of a delivery.
func (d *Applier) delivered(msg function.Message) delivery {
	return delivery{Seq: msg.Seq, StoredAt: msg.Time, Redelivered: msg.Delivered > 1}
}

// refuse reads the record, decides on it and carries the decision out, deciding again when a
// fence finds the record moved on. A key that is not valid has no record to read. With
// unreadable (a dead letter), neither has a record that cannot be read for any reason, and a
// fence that cannot be written is given up; otherwise a read error is retried, and a refusal
// on a redelivery is not published before its fence is written.
func (d *Applier) refuse(ctx context.Context, key string, msg function.Message, cmd domain.Command, unreadable bool, decideOn func(*domain.Record) decision) error {
	log := d.log.With("key", key, "command_id", cmd.ID, "seq", msg.Seq)
	for range maxConflicts {
		var cur *store.Versioned
		if key != "" {
			r, rv, err := d.records.Get(ctx, key)
			switch {
			case err == nil:
				cur = &store.Versioned{Record: r, Rev: rv}
			case errors.Is(err, store.ErrInvalidKey), unreadable:
			default:
				return readError(err)
			}
		}
		var rec *domain.Record
		var rev uint64
		if cur != nil {
			rec, rev = &cur.Record, cur.Rev
		}
		dec := decideOn(rec)
		switch dec.Action {
		case actSkip:
			log.Info("command handled before; nothing to do", "why", dec.Why)
			return nil
		case actRepublish:
			return d.republish(ctx, key, dec.Event, rev)
		case actFence:
			done, err := d.fence(ctx, key, *cur, dec, unreadable, log.With("action", dec.Action.String()))
			if done || err != nil {
				return err
			}
			continue
		}
		dec.Event.Revision = rev
		return d.refused(ctx, key, dec.Event)
	}
	return fmt.Errorf("record of %s kept changing: %w", key, store.ErrConflict)
}

// republish publishes again the outcome of a command handled before (applied, or refused
// behind a fence) with the revision rev of the record that holds it: the very same event
// under the same id, so the events stream keeps one copy.
func (d *Applier) republish(ctx context.Context, key string, ev domain.Event, rev uint64) error {
	ev.Revision = rev
	return d.publish(ctx, key, outcomeMsgID(ev), ev)
}

// outcomeMsgID is the de-duplication id an outcome is published under: a dead letter's differs
// from an applied or rejected one's.
func outcomeMsgID(ev domain.Event) string {
	id := domain.OutcomeMsgID(ev.CommandID, ev.CommandSeq)
	if ev.Outcome == domain.OutcomeDeadLettered {
		id += ":dlq"
	}
	return id
}

// readError classifies a failed record read: a record that does not decode will not decode on
// a retry either (dead-letter it with the reason, an operator must repair the record); anything
// else is worth retrying.
func readError(err error) error {
	if errors.Is(err, store.ErrCorruptRecord) {
		return function.Permanent(fmt.Errorf("read record: %w", err))
	}
	return fmt.Errorf("read record: %w", err)
}

func (d *Applier) publish(ctx context.Context, key, msgID string, ev domain.Event) error {
	b, err := domain.EncodeEvent(ev)
	if err != nil {
		return function.Permanent(err)
	}
	out := function.EventMsg(domain.EventSubject(key), msgID, domain.OutcomeCEType(ev.Outcome), ev.ResourceID, ev.At, b)
	if _, err := d.events.PublishMsg(ctx, out); err != nil {
		return fmt.Errorf("publish outcome event: %w", err)
	}
	return nil
}
