package policies

import (
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// action is what the handler does with a policy command once it is decided.
type action int

// Actions of a decision.
const (
	// actApply writes the revision (decision.Value, decision.Meta; a delete when Delete) at the
	// scope's revision as read, then publishes decision.Event.
	actApply action = iota + 1
	// actReject, actDuplicate and actRepublish publish decision.Event and write nothing.
	actReject
	actDuplicate
	actRepublish
	// actSkip does nothing: the command already has its outcome.
	actSkip
)

var actionNames = [...]string{actApply: "apply", actReject: "reject", actDuplicate: "duplicate", actRepublish: "republish", actSkip: "skip"}

func (a action) String() string { return actionNames[a] }

// current is the scope's revision as the handler read it from the bucket.
type current struct {
	Rev      uint64 // 0: the scope never had a policy
	Deleted  bool
	Meta     domain.PolicyMeta
	StoredAt time.Time
}

// delivery is what the handler knows of one delivery of a stored policy command.
type delivery struct {
	Seq      uint64    // sequence in MAINT_POLICIES
	StoredAt time.Time // when the stream stored it: the time of the 48/32 rule and of signing
}

// decision is the outcome of one policy command on its scope's revision.
type decision struct {
	Action action
	Value  []byte // actApply: the policy document to write (nil with Delete)
	Delete bool
	Meta   domain.PolicyMeta // actApply: the revision's meta header
	Event  domain.PolicyEvent
	Why    string // for the log
}

// decide is every exactly-once rule of the policies function, without I/O, as the command
// function decides on a record: the scope's last revision carries the ledger of the policy
// commands applied to it (domain.PolicyMeta). The command that wrote it, delivered again,
// publishes that outcome again (rebuilt from the revision, the same event); one stored before
// it was handled; an id it remembers is a duplicate; a signed command is refused past its age
// or as a possible replay; a policy is judged at the command's stored time (its 48/32 rule),
// never a replica's clock. at stamps rejections and duplicates only.
func decide(cur current, cmd policy.Command, d delivery, maxAge time.Duration, at time.Time) decision {
	l := cur.Meta.Ledger
	switch {
	case cur.Rev != 0 && l.LastCommandSeq == d.Seq && l.LastCommandID == cmd.ID:
		ev := applied(cmd, cur.Rev, cur.Meta.At, d.Seq)
		return decision{Action: actRepublish, Event: ev, Why: "already applied; its outcome again"}
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
	var value []byte
	if cmd.Policy != nil {
		if _, rej := cmd.Compile(d.StoredAt); rej != nil {
			return rejected(cmd, rej, cur.Rev, at, d.Seq, "policy refused")
		}
		b, err := cmd.Policy.Encode()
		if err != nil {
			return rejected(cmd, &domain.Rejection{Code: domain.CodeInvalidRequestContent, Message: err.Error()}, cur.Rev, at, d.Seq, "policy does not encode")
		}
		value = b
	}
	meta := domain.PolicyMeta{Ledger: l, Prev: cur.Rev, Actor: cmd.Actor, At: at}
	issued, _ := cmd.Issued()
	meta.Applied(cmd.ID, d.Seq, d.StoredAt, cmd.SignerKey != "", issued, maxAge)
	// The revision comes with the write. A delete of a scope without a policy is applied too:
	// its id must be remembered like any other.
	ev := applied(cmd, 0, at, d.Seq)
	return decision{Action: actApply, Value: value, Delete: cmd.Policy == nil, Meta: meta, Event: ev, Why: "applied"}
}

func outcome(cmd policy.Command, o domain.Outcome, rev uint64, at time.Time, seq uint64) domain.PolicyEvent {
	return domain.PolicyEvent{CommandID: cmd.ID, Scope: cmd.Scope, Action: cmd.Action(), Outcome: o, Revision: rev, At: at, Actor: cmd.Actor, CommandSeq: seq}
}

func applied(cmd policy.Command, rev uint64, at time.Time, seq uint64) domain.PolicyEvent {
	return outcome(cmd, domain.OutcomeApplied, rev, at, seq)
}

func rejected(cmd policy.Command, rej *domain.Rejection, rev uint64, at time.Time, seq uint64, why string) decision {
	ev := outcome(cmd, domain.OutcomeRejected, rev, at, seq)
	ev.Code, ev.Message, ev.Target = rej.Code, rej.Message, rej.Target
	return decision{Action: actReject, Event: ev, Why: why}
}
