package policies

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/policy"
	"maintsignals/shared/signing"
	"maintsignals/shared/store"
)

// maxConflicts bounds re-read rounds on a lost compare-and-swap (a racing copy of the command).
const maxConflicts = 5

// Handle applies one policy command: gate (signature, content, authority over the scope), load
// the scope's last revision, decide, commit. nil: the command has its outcome published.
func (a *Applier) Handle(ctx context.Context, msg function.Message) error {
	key := domain.KeyFromSubject(msg.Subject)
	msgID := msg.Header.Get(domain.HeaderMsgID)
	d := delivery{Seq: msg.Seq, StoredAt: msg.Time}
	cmd, rej := a.gate(msg, key, msgID)
	if rej != nil {
		if cmd.ID == "" {
			cmd.ID = msgID
		}
		return a.reject(ctx, key, cmd, rej, d)
	}
	if done, err := a.outcomes.Answered(ctx, key, cmd.ID, msg); done || err != nil {
		return err
	}
	for range maxConflicts {
		cur, err := a.load(ctx, key)
		if err != nil {
			return err
		}
		dec := decide(cur, cmd, d, a.maxAge, a.now().UTC())
		log := a.log.With("key", key, "command_id", cmd.ID, "seq", msg.Seq, "action", dec.Action.String())
		switch dec.Action {
		case actSkip:
			log.Info("policy command handled before; nothing to do", "why", dec.Why)
			return nil
		case actRepublish:
			log.Info("policy command applied before; publishing its outcome again")
			return a.outcomes.Publish(ctx, key, domain.OutcomeMsgID(cmd.ID, msg.Seq), dec.Event)
		case actDuplicate:
			a.metrics.command(ctx, domain.OutcomeDuplicate, "")
			return a.outcomes.Publish(ctx, key, domain.OutcomeMsgID(cmd.ID, msg.Seq)+":dup", dec.Event)
		case actReject:
			return a.rejected(ctx, key, dec.Event)
		}
		if err := function.Holding(ctx); err != nil {
			return err
		}
		rev, err := a.write(ctx, key, cur.Rev, dec)
		if errors.Is(err, errConflict) {
			log.Debug("policy moved on; reading again", "err", err)
			continue
		}
		if err != nil {
			return err
		}
		dec.Event.Revision = rev
		a.metrics.command(ctx, domain.OutcomeApplied, "")
		log.Info("policy command applied", "scope", cmd.Scope, "policy_action", cmd.Action(), "outcome", domain.OutcomeApplied, "revision", rev)
		return a.outcomes.Publish(ctx, key, domain.OutcomeMsgID(cmd.ID, msg.Seq), dec.Event)
	}
	return fmt.Errorf("policy of %s kept changing: %w", key, errConflict)
}

// gate reads and checks a policy command (function.Gate): its signature, its content, then
// whether the signer may set the scope's policy.
func (a *Applier) gate(msg function.Message, key, msgID string) (policy.Command, *domain.Rejection) {
	decode := func(body []byte) (policy.Command, *domain.Rejection) { return policy.DecodeCommand(body, key, msgID) }
	authorize := func(s *signing.Signer, cmd policy.Command) *domain.Rejection {
		return a.auth.AuthorizePolicy(s, cmd.ParsedScope())
	}
	signedBy := func(cmd *policy.Command, s *signing.Signer) {
		cmd.Actor = ""
		if s != nil {
			cmd.Actor, cmd.SignerKey = s.Name, s.Key
		}
	}
	return function.Gate(msg, a.auth, decode, authorize, signedBy)
}

// load reads the scope's last revision (a delete included), with its header, from the stream
// leader (provisioning turns direct gets off on a replicated bucket). A header that does not
// decode will not on a retry either: an operator must repair the scope.
func (a *Applier) load(ctx context.Context, key string) (current, error) {
	r, err := store.LastPolicy(ctx, a.bucket, key)
	switch {
	case errors.Is(err, store.ErrCorruptRecord):
		return current{}, function.Permanent(err)
	case err != nil:
		return current{}, err
	case r == nil:
		return current{}, nil
	}
	return current{Rev: r.Seq, Deleted: r.Deleted, Meta: r.Meta, StoredAt: r.At}, nil
}

var errConflict = errors.New("the scope's policy changed since it was read")

// write publishes the decided revision to the scope's subject of the bucket, expecting the
// subject's last sequence to be rev (0: none): a compare-and-swap.
func (a *Applier) write(ctx context.Context, key string, rev uint64, dec decision) (uint64, error) {
	meta, err := domain.EncodePolicyMeta(dec.Meta)
	if err != nil {
		return 0, function.Permanent(err)
	}
	m := nats.NewMsg(domain.PolicySubject(key))
	m.Data = dec.Value
	m.Header.Set(domain.HeaderPolicyMeta, meta)
	if dec.Delete {
		m.Header.Set(domain.HeaderKVOperation, domain.KVDelete)
	}
	seq, moved, err := function.PublishAt(ctx, a.js, m, rev)
	if moved {
		return 0, fmt.Errorf("write policy %s at %d: %w", key, rev, errConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("write policy %s: %w", key, err)
	}
	return seq, nil
}

// reject publishes the outcome of a command refused at the gate, unless the scope's revision
// shows it was handled before (a late copy from a replica that lost it).
func (a *Applier) reject(ctx context.Context, key string, cmd policy.Command, rej *domain.Rejection, d delivery) error {
	cur, err := a.load(ctx, key)
	if err != nil {
		return err
	}
	if cur.Meta.HandledBefore(d.Seq, d.StoredAt) {
		return nil
	}
	return a.rejected(ctx, key, rejected(cmd, rej, cur.Rev, a.now().UTC(), d.Seq, "refused at the gate").Event)
}

func (a *Applier) rejected(ctx context.Context, key string, ev domain.PolicyEvent) error {
	a.metrics.command(ctx, domain.OutcomeRejected, ev.Code)
	a.log.Warn("policy command rejected", "key", key, "command_id", ev.CommandID, "outcome", domain.OutcomeRejected, "code", ev.Code, "target", ev.Target, "message", ev.Message)
	return a.outcomes.Publish(ctx, key, domain.OutcomeMsgID(ev.CommandID, ev.CommandSeq), ev)
}

// deadLetter publishes the outcome of a command the runtime gave up on: dead_lettered, unless
// the revision shows it applied (its applied outcome again) or handled before.
func (a *Applier) deadLetter(ctx context.Context, msg function.Message, reason string) error {
	key := domain.KeyFromSubject(msg.Subject)
	cmd, _ := policy.DecodeCommand(msg.Data, key, "")
	if cmd.ID == "" {
		cmd.ID = msg.Header.Get(domain.HeaderMsgID)
	}
	d := delivery{Seq: msg.Seq, StoredAt: msg.Time}
	cur, err := a.load(ctx, key)
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
	a.metrics.command(ctx, domain.OutcomeDeadLettered, "")
	return a.outcomes.Publish(ctx, key, domain.OutcomeMsgID(cmd.ID, msg.Seq)+":dlq", ev)
}
