package subscriptions

import (
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/subscription"
)

// action is what the handler does with a subscription command once it is decided.
type action int

// Actions of a decision.
const (
	// actApply writes the secret (a create), then the revision (decision.Value and Meta; a
	// delete when Delete) at the located name's revision as read, then publishes
	// decision.Event.
	actApply action = iota + 1
	// actReject, actDuplicate and actRepublish publish decision.Event and write nothing
	// (actRepublish of a delete drops the secret again, in case a crash left it).
	actReject
	actDuplicate
	actRepublish
	// actSkip does nothing: the command already has its outcome.
	actSkip
)

var actionNames = [...]string{actApply: "apply", actReject: "reject", actDuplicate: "duplicate", actRepublish: "republish", actSkip: "skip"}

func (a action) String() string { return actionNames[a] }

// current is the located name's last revision as the handler read it from the bucket.
type current struct {
	Rev     uint64 // 0: the name never had a subscription
	Deleted bool
	Meta    domain.SubscriptionMeta
	Record  subscription.Record // when Rev != 0 and not Deleted
}

// exists reports whether a subscription is in force under the name.
func (c current) exists() bool { return c.Rev != 0 && !c.Deleted }

// delivery is what the handler knows of one delivery of a stored subscription command.
type delivery struct {
	Seq      uint64    // sequence in MAINT_SUBSCRIPTIONS
	StoredAt time.Time // when the stream stored it: where the subscription starts, and the time of signing
}

// decision is the outcome of one subscription command on its located name's revision.
type decision struct {
	Action action
	Value  []byte // actApply of a create: the record to write
	Secret string // actApply of a create: the secret to write first
	Delete bool
	Meta   domain.SubscriptionMeta
	Event  domain.SubscriptionEvent
	Why    string // for the log
}

// decide is every exactly-once rule of the subscriptions function, without I/O, as the
// policies function decides on a scope: the name's last revision carries the ledger of the
// commands applied to it. The command that wrote it, delivered again, publishes that outcome
// again (rebuilt from the revision); one stored before it was handled; an id it remembers is a
// duplicate; a signed command is refused past its age or as a possible replay. A create is
// refused while the name has a subscription (its secret was shown once: delete, then create);
// a delete needs one, of the scope the command names. at stamps the outcomes, which a
// redelivery republishes as they were.
func decide(cur current, cmd subscription.Command, d delivery, maxAge time.Duration, at time.Time) decision {
	l := cur.Meta.Ledger
	switch {
	case cur.Rev != 0 && l.LastCommandSeq == d.Seq && l.LastCommandID == cmd.ID:
		ev := outcome(cmd, domain.OutcomeApplied, cur.Rev, cur.Meta.At, d.Seq)
		ev.Delivery = cur.Record.Delivery
		return decision{Action: actRepublish, Event: ev, Delete: cur.Deleted, Why: "already applied; its outcome again"}
	case l.HandledBefore(d.Seq, d.StoredAt):
		return decision{Action: actSkip, Why: "stored before the command the revision holds: handled already"}
	case l.Seen(cmd.ID):
		ev := outcome(cmd, domain.OutcomeDuplicate, cur.Rev, at, d.Seq)
		ev.Message = "command id was applied before; nothing changed"
		return decision{Action: actDuplicate, Event: ev, Why: "id applied before"}
	}
	if cmd.SignerKey != "" {
		if rej := domain.CheckSigned(cmd.IssuedAt, d.StoredAt, maxAge, l.SignedForgotten); rej != nil {
			return rejected(cmd, rej, cur.Rev, at, d.Seq, "signature expired")
		}
	}
	if rej := refusal(cur, cmd); rej != nil {
		return rejected(cmd, rej, cur.Rev, at, d.Seq, "refused in the subscription's state")
	}
	return apply(cur, cmd, d, maxAge, at)
}

// refusal is why cmd cannot be applied to the name as it is, nil when it can.
func refusal(cur current, cmd subscription.Command) *domain.Rejection {
	switch {
	case cmd.Action == domain.SubscriptionCreate && cur.exists():
		return &domain.Rejection{Code: domain.CodeRequestNotAllowed, Target: "name",
			Message: "subscription " + cmd.Name + " already exists in " + cur.Record.Scope + ": delete it first (its secret is never shown again)"}
	case cmd.Action == domain.SubscriptionDelete && !cur.exists():
		return domain.InvalidParameter("name", "no subscription %s in %s", cmd.Name, cmd.Scope)
	case cmd.Action == domain.SubscriptionDelete && !sameScope(cur.Record.Scope, cmd):
		return domain.InvalidParameter("scope", "subscription %s has scope %s, not %s", cmd.Name, cur.Record.Scope, cmd.Scope)
	}
	return nil
}

// sameScope reports whether scope is the command's (compared as keys: without regard to case).
func sameScope(scope string, cmd subscription.Command) bool {
	sc, err := subscription.ParseScope(scope)
	return err == nil && sc.Key == cmd.ParsedScope().Key
}

// apply is the decision to apply cmd: the record of a create (starting after the command's
// stored time) or the delete, with the ledger that remembers the command.
func apply(cur current, cmd subscription.Command, d delivery, maxAge time.Duration, at time.Time) decision {
	meta := domain.SubscriptionMeta{Ledger: cur.Meta.Ledger, Prev: cur.Rev, Actor: cmd.Actor, At: at}
	issued, _ := cmd.Issued()
	meta.Applied(cmd.ID, d.Seq, d.StoredAt, cmd.SignerKey != "", issued, maxAge)
	ev := outcome(cmd, domain.OutcomeApplied, 0, at, d.Seq) // the revision comes with the write
	if cmd.Action == domain.SubscriptionDelete {
		return decision{Action: actApply, Delete: true, Meta: meta, Event: ev, Why: "applied"}
	}
	rec := subscription.Record{
		Name: cmd.Name, Scope: cmd.Scope, URL: cmd.URL, Filters: cmd.Filters(),
		Delivery:  domain.SubscriptionDelivery(cmd.Key(), cmd.ID, d.Seq),
		CommandID: cmd.ID, CommandSeq: d.Seq, CreatedAt: d.StoredAt, CreatedBy: cmd.Actor,
	}
	value, err := subscription.EncodeRecord(rec)
	if err != nil {
		return rejected(cmd, &domain.Rejection{Code: domain.CodeInvalidRequestContent, Message: err.Error()}, cur.Rev, at, d.Seq, "record does not encode")
	}
	ev.Delivery = rec.Delivery
	return decision{Action: actApply, Value: value, Secret: cmd.Secret, Meta: meta, Event: ev, Why: "applied"}
}

func outcome(cmd subscription.Command, o domain.Outcome, rev uint64, at time.Time, seq uint64) domain.SubscriptionEvent {
	return domain.SubscriptionEvent{CommandID: cmd.ID, Name: cmd.Name, Scope: cmd.Scope, Action: cmd.Action, Outcome: o, Revision: rev, At: at, Actor: cmd.Actor, CommandSeq: seq}
}

func rejected(cmd subscription.Command, rej *domain.Rejection, rev uint64, at time.Time, seq uint64, why string) decision {
	ev := outcome(cmd, domain.OutcomeRejected, rev, at, seq)
	ev.Code, ev.Message, ev.Target = rej.Code, rej.Message, rej.Target
	return decision{Action: actReject, Event: ev, Why: why}
}
