package subscriptions

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/signing"
	"maintsignals/shared/subscription"
)

// maxConflicts bounds re-read rounds on a lost compare-and-swap (a racing copy of the command).
const maxConflicts = 5

var errConflict = errors.New("the subscription changed since it was read")

// Handle applies one subscription command: gate (signature, content, authority over the
// scope), load the name's last revision, decide, commit. nil: the command has its outcome
// published.
func (a *Applier) Handle(ctx context.Context, msg function.Message) error {
	key := domain.SubscriptionKeyOf(msg.Subject)
	d := delivery{Seq: msg.Seq, StoredAt: msg.Time}
	cmd, rej := a.gate(msg, key)
	if rej != nil {
		if cmd.ID == "" {
			cmd.ID = msg.Header.Get(domain.HeaderMsgID)
		}
		return a.reject(ctx, key, cmd, rej, d)
	}
	if done, err := a.outcomes.Answered(ctx, key, cmd.ID, msg); done || err != nil {
		return err
	}
	for range maxConflicts {
		cur, secretRev, err := a.load(ctx, key)
		if err != nil {
			return err
		}
		dec := decide(cur, cmd, d, a.maxAge, a.now().UTC())
		err = a.commit(ctx, key, cur, secretRev, dec, d)
		if errors.Is(err, errConflict) {
			a.log.Debug("subscription moved on; reading again", "key", key, "command_id", cmd.ID, "err", err)
			continue
		}
		return err
	}
	return fmt.Errorf("subscription %s kept changing: %w", key, errConflict)
}

// commit carries a decision out: writes (for an apply), then the outcome.
func (a *Applier) commit(ctx context.Context, key string, cur current, secretRev uint64, dec decision, d delivery) error {
	ev := dec.Event
	log := a.log.With("key", key, "command_id", ev.CommandID, "seq", d.Seq, "action", dec.Action.String())
	msgID := domain.OutcomeMsgID(ev.CommandID, d.Seq)
	switch dec.Action {
	case actSkip:
		log.Info("subscription command handled before; nothing to do", "why", dec.Why)
		return nil
	case actRepublish:
		log.Info("subscription command applied before; publishing its outcome again")
		if dec.Delete {
			if err := a.dropSecret(ctx, key, secretRev); err != nil {
				return err
			}
		}
		return a.outcomes.Publish(ctx, key, msgID, ev)
	case actDuplicate:
		a.count(ctx, domain.OutcomeDuplicate, "")
		return a.outcomes.Publish(ctx, key, msgID+":dup", ev)
	case actReject:
		return a.rejected(ctx, key, ev)
	}
	if err := function.Holding(ctx); err != nil {
		return err
	}
	rev, err := a.write(ctx, key, cur.Rev, secretRev, dec)
	if err != nil {
		return err
	}
	ev.Revision = rev
	a.count(ctx, domain.OutcomeApplied, "")
	log.Info("subscription command applied", "subscription_action", ev.Action, "scope", ev.Scope, "delivery", ev.Delivery, "revision", rev)
	return a.outcomes.Publish(ctx, key, msgID, ev)
}

// gate reads and checks a subscription command (function.Gate): its signature, its content,
// then whether the signer may manage the subscriptions of its scope.
func (a *Applier) gate(msg function.Message, key string) (subscription.Command, *domain.Rejection) {
	msgID := msg.Header.Get(domain.HeaderMsgID)
	decode := func(body []byte) (subscription.Command, *domain.Rejection) {
		return subscription.DecodeCommand(body, key, msgID)
	}
	authorize := func(s *signing.Signer, cmd subscription.Command) *domain.Rejection {
		return a.auth.AuthorizeSubscription(s, cmd.ParsedScope())
	}
	signedBy := func(cmd *subscription.Command, s *signing.Signer) {
		cmd.Actor = ""
		if s != nil {
			cmd.Actor, cmd.SignerKey = s.Name, s.Key
		}
	}
	return function.Gate(msg, a.auth, decode, authorize, signedBy)
}

// load reads the name's last revision (a delete included) and its secret's last sequence, each
// from its stream's leader.
func (a *Applier) load(ctx context.Context, key string) (current, uint64, error) {
	s, err := subscription.Last(ctx, a.bucket, key)
	switch {
	case errors.Is(err, subscription.ErrCorrupt):
		return current{}, 0, function.Permanent(err)
	case err != nil:
		return current{}, 0, err
	}
	var cur current
	if s != nil {
		cur = current{Rev: s.Rev, Deleted: s.Deleted, Meta: s.Meta, Record: s.Record}
	}
	m, err := a.secrets.GetLastMsgForSubject(ctx, domain.SubscriptionSecretSubject(key))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return cur, 0, nil
	case err != nil:
		return cur, 0, fmt.Errorf("read the secret of %s: %w", key, err)
	}
	return cur, m.Sequence, nil
}

// write commits an applied decision: a create's secret, then the record (or the delete), each
// a compare-and-swap on its subject's last sequence; a delete then drops the secret. It
// returns the record's new revision.
func (a *Applier) write(ctx context.Context, key string, rev, secretRev uint64, dec decision) (uint64, error) {
	if !dec.Delete {
		m := nats.NewMsg(domain.SubscriptionSecretSubject(key))
		m.Data = []byte(dec.Secret)
		m.Header.Set(domain.HeaderSubscriptionCommand, dec.Event.CommandID)
		if _, err := a.cas(ctx, m, secretRev); err != nil {
			return 0, fmt.Errorf("write the secret of %s: %w", key, err)
		}
	}
	meta, err := domain.EncodeSubscriptionMeta(dec.Meta)
	if err != nil {
		return 0, function.Permanent(err)
	}
	m := nats.NewMsg(domain.SubscriptionSubject(key))
	m.Data = dec.Value
	m.Header.Set(domain.HeaderSubscriptionMeta, meta)
	if dec.Delete {
		m.Header.Set(domain.HeaderKVOperation, domain.KVDelete)
	}
	written, err := a.cas(ctx, m, rev)
	if err != nil {
		return 0, fmt.Errorf("write subscription %s: %w", key, err)
	}
	if dec.Delete {
		if err := a.dropSecret(ctx, key, secretRev); err != nil {
			return 0, err
		}
	}
	return written, nil
}

// dropSecret deletes a deleted subscription's secret (the bucket keeps one revision: the
// delete replaces it), expecting it unchanged since it was read: a newer create's secret stays.
func (a *Applier) dropSecret(ctx context.Context, key string, secretRev uint64) error {
	if secretRev == 0 {
		return nil
	}
	m := nats.NewMsg(domain.SubscriptionSecretSubject(key))
	m.Header.Set(domain.HeaderKVOperation, domain.KVDelete)
	if _, err := a.cas(ctx, m, secretRev); err != nil && !errors.Is(err, errConflict) {
		return fmt.Errorf("drop the secret of %s: %w", key, err)
	}
	return nil
}

// cas publishes m expecting its subject's last sequence to be rev (0: none); a wrong one is
// errConflict.
func (a *Applier) cas(ctx context.Context, m *nats.Msg, rev uint64) (uint64, error) {
	seq, moved, err := function.PublishAt(ctx, a.js, m, rev)
	if moved {
		return 0, fmt.Errorf("at %d: %w", rev, errConflict)
	}
	return seq, err
}

// reject publishes the outcome of a command refused at the gate, unless the name's revision
// shows it was handled before (a late copy from a replica that lost it).
func (a *Applier) reject(ctx context.Context, key string, cmd subscription.Command, rej *domain.Rejection, d delivery) error {
	cur, _, err := a.load(ctx, key)
	if err != nil && !errors.Is(err, function.ErrPermanent) {
		return err
	}
	if cur.Meta.HandledBefore(d.Seq, d.StoredAt) {
		return nil
	}
	return a.rejected(ctx, key, rejected(cmd, rej, cur.Rev, a.now().UTC(), d.Seq, "refused at the gate").Event)
}

func (a *Applier) rejected(ctx context.Context, key string, ev domain.SubscriptionEvent) error {
	a.count(ctx, domain.OutcomeRejected, ev.Code)
	a.log.Warn("subscription command rejected", "key", key, "command_id", ev.CommandID, "outcome", domain.OutcomeRejected, "code", ev.Code, "target", ev.Target, "message", ev.Message)
	return a.outcomes.Publish(ctx, key, domain.OutcomeMsgID(ev.CommandID, ev.CommandSeq), ev)
}

// deadLetter publishes the outcome of a command the runtime gave up on: dead_lettered, unless
// the revision shows it applied (its applied outcome again) or handled before.
func (a *Applier) deadLetter(ctx context.Context, msg function.Message, reason string) error {
	key := domain.SubscriptionKeyOf(msg.Subject)
	cmd, _ := subscription.DecodeCommand(msg.Data, "", "")
	if cmd.ID == "" {
		cmd.ID = msg.Header.Get(domain.HeaderMsgID)
	}
	d := delivery{Seq: msg.Seq, StoredAt: msg.Time}
	cur, _, err := a.load(ctx, key)
	if err == nil {
		dec := decide(cur, cmd, d, a.maxAge, a.now().UTC())
		switch dec.Action {
		case actRepublish:
			return a.outcomes.Publish(ctx, key, domain.OutcomeMsgID(cmd.ID, msg.Seq), dec.Event)
		case actSkip:
			return nil
		}
	}
	ev := outcome(cmd, domain.OutcomeDeadLettered, cur.Rev, a.now().UTC(), msg.Seq)
	ev.Message = reason
	a.count(ctx, domain.OutcomeDeadLettered, "")
	return a.outcomes.Publish(ctx, key, domain.OutcomeMsgID(cmd.ID, msg.Seq)+":dlq", ev)
}

func (a *Applier) count(ctx context.Context, outcome domain.Outcome, code domain.Code) {
	a.commands.Add(ctx, 1, metric.WithAttributes(
		attribute.String("cluster.maintenance.outcome", string(outcome)),
		attribute.String("cluster.maintenance.code", string(code)),
	))
}
