package command

import (
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// action is what the handler does with a command once it is decided.
type action int

// Actions of a decision.
const (
	// actApply writes decision.Next and then publishes decision.Event.
	actApply action = iota + 1
	// actReject, actDuplicate and actRepublish publish decision.Event and write nothing.
	actReject
	actDuplicate
	actRepublish
	// actSkip does nothing: the command already has its outcome.
	actSkip
	// actDeadLetter publishes decision.Event, the dead_lettered outcome, and writes nothing.
	actDeadLetter
	// actFence writes decision.Next, the record with the refusal's fence (domain.Fence), and
	// then publishes decision.Event, the refusal (rejected or dead_lettered): a refusal decided
	// on a redelivery, when another replica may still hold the command.
	actFence
	// actReread decides again on a fresh read: the remembered record would not apply the command,
	// and only an applied outcome may be decided on a remembered record (its write checks it).
	actReread
)

var actionNames = [...]string{actApply: "apply", actReject: "reject", actDuplicate: "duplicate", actRepublish: "republish", actSkip: "skip", actReread: "reread", actDeadLetter: "dead-letter", actFence: "fence"}

func (a action) String() string { return actionNames[a] }

// delivery is what the handler knows of one delivery of a stored command.
type delivery struct {
	Seq      uint64    // sequence in MAINT_COMMANDS
	StoredAt time.Time // when the stream stored it: the command's time for every time-based rule
	// Remembered: the record is this replica's copy of its own last write, not a fresh read.
	Remembered bool
	// Redelivered: not the first delivery, so a replica that had the command before (cut off,
	// its ack wait run out) may still be committing it; a refusal is then fenced.
	Redelivered bool
	// Policy is the customer's policy in force for the entity when the command was stored
	// (nil: none, or the task is one no policy refuses); see policyInForce.
	Policy *policy.Policy
	// Deadline is the deadline of the campaign whose window a Reschedule moves (zero: none).
	Deadline time.Time
}

// settings are the rules of the decision: the same on every replica.
type settings struct {
	// Admission limits how often an entity's record changes.
	Admission domain.Admission
	// MaxCommandAge is how long after it was issued a signed command is still accepted, by the
	// time the stream stored it; one issued more than domain.MaxFutureSkew after that is refused too.
	MaxCommandAge time.Duration
	// MinNotice is the notice policy (domain.CheckNotice): a Pending whose window starts
	// sooner than this after the command was stored is refused unless forced; 0: none.
	MinNotice time.Duration
}

// decision is the outcome of one command on one record.
type decision struct {
	Action     action
	Next       domain.Record     // Apply: the record to write
	Event      domain.Event      // actApply, actReject, actDuplicate, Republish: the outcome to publish
	Transition domain.Transition // actApply
	Why        string            // for the log
}

// decide is every exactly-once rule of the command function, without I/O. Its inputs are the
// record, the command and facts of the stored message, never a replica's memory or clock: two
// replicas (one of them cut off and back) or two deliveries deciding the same command on the
// same record reach the same decision, and a record that moved on (a later command wrote it)
// makes any late decision a actSkip. at only stamps the outcome.
func decide(rec domain.Record, cmd domain.Command, d delivery, rules settings, at time.Time) decision {
	dec := decideOn(rec, cmd, d, rules, at)
	if d.Remembered && dec.Action != actApply {
		return decision{Action: actReread, Why: "remembered record would not apply it"}
	}
	dec.Event.CommandSeq = d.Seq
	if dec.Action == actReject || dec.Action == actDuplicate {
		dec.Event.Campaign = rec.Campaign // the record's campaign, unchanged
	}
	return fenced(rec, dec, d)
}

// fenced turns a refusal decided on a redelivery into one the record carries before it is
// published (actFence): a replica that took the command before may have decided to apply it
// on the revision read here and be about to commit it; the fence's write makes that commit
// fail, and the refusal is published only once the fence stands. On a first delivery no other
// replica has had the command, and a refusal writes nothing (refusals stay cheap under a flood).
func fenced(rec domain.Record, dec decision, d delivery) decision {
	if !d.Redelivered || (dec.Action != actReject && dec.Action != actDeadLetter) {
		return dec
	}
	dec.Next = rec.FenceRefusal(dec.Event, d.StoredAt)
	dec.Action, dec.Why = actFence, dec.Why+"; fenced, as a redelivery"
	return dec
}

func decideOn(rec domain.Record, cmd domain.Command, d delivery, rules settings, at time.Time) decision {
	// The write happened, the event may not have: the very same event again, under the same
	// id, so the events stream keeps one copy.
	if dec, ok := handledAlready(rec, cmd, d); ok {
		return dec
	}
	switch {
	case rec.Seen(cmd.ID):
		return decision{Action: actDuplicate, Event: domain.Duplicate(cmd, rec.State, at), Why: "id applied before"}
	}
	if rej := signedOnce(rec, cmd, d.StoredAt, rules.MaxCommandAge); rej != nil {
		return decision{Action: actReject, Event: domain.Rejected(cmd, rec.State, rej, at), Why: "signature expired"}
	}
	ref, held, rej := campaignRules(rec, cmd)
	switch {
	case held:
		return decision{Action: actDuplicate, Event: domain.Duplicate(cmd, rec.State, at), Why: "the entity holds this campaign generation's window"}
	case rej != nil:
		return decision{Action: actReject, Event: domain.Rejected(cmd, rec.State, rej, at), Why: "campaign rules"}
	}
	verdict := enforcePolicy(cmd, d, rules)
	if verdict.Rejection != nil {
		return decision{Action: actReject, Event: domain.Rejected(cmd, rec.State, verdict.Rejection, at), Why: "refused by the notice or the policy in force"}
	}
	adm := rules.Admission
	tokens, ok := adm.Admit(rec, d.StoredAt)
	if !ok {
		return decision{Action: actReject, Event: domain.Rejected(cmd, rec.State, domain.TooMany(), at), Why: "over the entity's admission"}
	}
	next, tr, rej := transition(rec, cmd, d, at)
	if rej != nil {
		return decision{Action: actReject, Event: domain.Rejected(cmd, rec.State, rej, at), Why: "not allowed"}
	}
	if ref != nil {
		next.Campaign = ref
	}
	ev := domain.Applied(cmd, tr, at)
	ev.CommandSeq, ev.Campaign, ev.Override = d.Seq, domain.EventCampaign(rec, next), verdict.Override
	domain.Annotate(&ev, rec, d.StoredAt)
	next.LastCommandID, next.LastCommandSeq, next.LastCommandAt = cmd.ID, d.Seq, d.StoredAt
	next.Remember(cmd.ID)
	next.LastEvent = &ev
	next.Fence = nil // the refusal it held is followed by this command
	if adm.Rate > 0 {
		next.AdmitTokens, next.AdmitAt = tokens, later(d.StoredAt, rec.AdmitAt)
	}
	// Past the horizon no signed command is accepted (by its stored time), so its id need not
	// be remembered.
	horizon := domain.SignedHorizon(d.StoredAt, rules.MaxCommandAge)
	if cmd.SignerKey != "" {
		issued, _ := cmd.Issued()
		next.RememberSigned(cmd.ID, issued, horizon)
	} else {
		next.RememberSigned("", time.Time{}, horizon)
	}
	return decision{Action: actApply, Next: next, Event: ev, Transition: tr, Why: "applied"}
}

// decideRejection is the outcome of a command refused at the gate (it does not decode, or its
// signature does not hold), on its entity's record as read (nil: there is none to read, the
// key being invalid): nothing when the record shows the command handled before (a late copy
// from a replica that lost it), else the rejection in the record's unchanged state.
//
// On a redelivery the refusal is fenced (see fenced) when there is a record to fence: a replica
// configured otherwise (signers, the resource-ID pattern, during a rolling change) may have
// decided to apply it.
func decideRejection(rec *domain.Record, cmd domain.Command, rej *domain.Rejection, d delivery, at time.Time) decision {
	state := domain.StateNone
	var ref *domain.CampaignRef
	if rec != nil {
		if dec, ok := handledAlready(*rec, cmd, d); ok {
			return dec
		}
		state, ref = rec.State, rec.Campaign
	}
	ev := domain.Rejected(cmd, state, rej, at)
	ev.CommandSeq, ev.Campaign = d.Seq, ref
	dec := decision{Action: actReject, Event: ev, Why: "refused at the gate"}
	if rec == nil {
		return dec
	}
	return fenced(*rec, dec, d)
}

// handledAlready is the decision on a command whose outcome the record already holds: its
// outcome again when the record was written by it (applied or fenced), nothing when it was
// handled before the command that wrote the record.
func handledAlready(rec domain.Record, cmd domain.Command, d delivery) (decision, bool) {
	switch {
	case appliedLast(rec, cmd.ID, d.Seq):
		return decision{Action: actRepublish, Event: *rec.LastEvent, Why: "applied; its outcome again"}, true
	case rec.Fenced(cmd.ID, d.Seq):
		return decision{Action: actRepublish, Event: rec.Fence.Event, Why: "refused before, behind a fence; its outcome again"}, true
	case rec.HandledBefore(d.Seq, d.StoredAt):
		return decision{Action: actSkip, Why: "stored before the command the record holds: handled already"}, true
	}
	return decision{}, false
}

// decideDeadLetter is the outcome of a command the runtime gave up on, for reason, on its
// entity's record as read (nil: it could not be read, often why the command is here; the state
// is then reported as "" rather than guessed): the applied outcome again when the record shows
// the command applied and only its event failed (an outcome is never replaced by a wrong one),
// nothing when it shows the command handled before (a late copy: its outcome exists), else
// dead_lettered.
//
// On a redelivery, with a record to fence, the dead letter is fenced (see fenced) like a refusal.
func decideDeadLetter(rec *domain.Record, cmd domain.Command, reason string, d delivery, at time.Time) decision {
	var state domain.State
	if rec != nil {
		if dec, ok := handledAlready(*rec, cmd, d); ok {
			return dec
		}
		state = rec.State
	}
	ev := domain.DeadLettered(cmd, state, reason, at)
	ev.CommandSeq = d.Seq
	dec := decision{Action: actDeadLetter, Event: ev, Why: "given up"}
	if rec == nil {
		return dec
	}
	return fenced(*rec, dec, d)
}

// signedOnce refuses a signed command that is too old or too far ahead of the stream's clock
// when stored, or that was issued no later than a signed command the record has forgotten (it
// could be a replay of that one). A replay of a remembered one is a duplicate before this.
func signedOnce(rec domain.Record, cmd domain.Command, storedAt time.Time, maxAge time.Duration) *domain.Rejection {
	if cmd.SignerKey == "" {
		return nil
	}
	return domain.CheckSigned(cmd.IssuedAt, storedAt, maxAge, rec.SignedForgottenUpTo())
}

// appliedLast reports whether the record was last written by this very stored command.
func appliedLast(rec domain.Record, commandID string, seq uint64) bool {
	return rec.LastCommandSeq == seq && rec.LastCommandID == commandID && rec.LastEvent != nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
