package command

import (
	"fmt"
	"testing"
	"time"

	"maintsignals/shared/domain"
)

// TestDecide is every exactly-once rule as a row: the record, the command and the delivery
// facts in, the decision out, without a broker. Rows with gate are commands refused before
// they are decided (decideRejection), rows with gaveUp commands the runtime gave up on
// (decideDeadLetter); unread: no record could be read.
func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const id = "/subscriptions/s/resourceGroups/rg/providers/p/c1"
	cmd := func(cid string, task domain.Task) domain.Command {
		return domain.Command{ID: cid, ResourceID: id, Task: task}
	}
	applied := func(state domain.State, cid string, seq uint64, at time.Time) domain.Record {
		ev := domain.Event{CommandID: cid, Outcome: domain.OutcomeApplied, To: state, CommandSeq: seq}
		r := domain.Record{ResourceID: id, State: state, LastCommandID: cid, LastCommandSeq: seq, LastCommandAt: at, LastEvent: &ev}
		r.Remember(cid)
		return r
	}
	pending := applied(domain.StatePending, "c-10", 10, t0)
	signedRaw := func(cid, issued string) domain.Command {
		return domain.Command{ID: cid, ResourceID: id, Task: domain.TaskNone, IssuedAt: issued, SignerKey: "UKEY"}
	}
	signed := func(cid string, issued time.Time) domain.Command {
		return signedRaw(cid, issued.Format(time.RFC3339Nano))
	}
	signedBy := func(r domain.Record, last time.Time) domain.Record {
		r.SignedUpTo = map[string]time.Time{"UKEY": last}
		return r
	}
	updating := applied(domain.StatePlanned, "c-10", 10, t0)
	updating.Updating, updating.Task = true, domain.TaskEverything
	limit := domain.Admission{Rate: 1, Burst: 2}
	garbled := &domain.Rejection{Code: domain.CodeInvalidRequestContent, Message: "not JSON"}
	badKey := &domain.Rejection{Code: domain.CodeInvalidParameter, Target: "resourceId", Message: "does not encode to the subject's key"}
	unsigned := &domain.Rejection{Code: domain.CodeUnauthorized, Message: "signature missing"}
	drained := pending
	drained.AdmitTokens, drained.AdmitAt = 0.5, t0

	for _, tc := range []struct {
		name     string
		rec      domain.Record
		cmd      domain.Command
		d        delivery
		rules    settings
		gate     *domain.Rejection
		gaveUp   string
		unread   bool
		want     action
		wantTo   domain.State
		wantCode domain.Code
	}{
		{name: "first command of a new entity is applied", rec: domain.Record{State: domain.StateNone}, cmd: cmd("c-1", domain.TaskPending),
			d: delivery{Seq: 1, StoredAt: t0}, want: actApply, wantTo: domain.StatePending},
		{name: "next command in stream order is applied", rec: pending, cmd: cmd("c-11", domain.TaskEverything),
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actApply, wantTo: domain.StatePlanned},
		{name: "the command applied last, delivered again, republishes its outcome", rec: pending, cmd: cmd("c-10", domain.TaskPending),
			d: delivery{Seq: 10, StoredAt: t0}, want: actRepublish},
		{name: "a command stored before the one the record holds was handled: nothing to do", rec: pending, cmd: cmd("c-9", domain.TaskNone),
			d: delivery{Seq: 9, StoredAt: t0.Add(-time.Second)}, want: actSkip},
		{name: "a late copy of an older command on a replica that lost it: nothing to do, even on a first delivery", rec: pending, cmd: cmd("c-3", domain.TaskEverything),
			d: delivery{Seq: 3, StoredAt: t0.Add(-time.Minute)}, want: actSkip},
		{name: "a lower sequence stored later is a recreated stream: decided", rec: pending, cmd: cmd("c-new", domain.TaskNone),
			d: delivery{Seq: 2, StoredAt: t0.Add(time.Hour)}, want: actApply, wantTo: domain.StateNone},
		{name: "an id applied before, sent again after the duplicate window, is a duplicate", rec: pending, cmd: cmd("c-10", domain.TaskNone),
			d: delivery{Seq: 50, StoredAt: t0.Add(time.Hour)}, want: actDuplicate},
		{name: "not allowed in the current state is rejected", rec: pending, cmd: cmd("c-11", domain.TaskUpdateSucceeded),
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actReject, wantCode: domain.CodeRequestNotAllowed},
		{name: "while updating, a forced command is applied", rec: updating, cmd: domain.Command{ID: "c-11", ResourceID: id, Task: domain.TaskNone, Force: true},
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actApply, wantTo: domain.StateNone},
		{name: "while updating, an unforced command is rejected", rec: updating, cmd: cmd("c-11", domain.TaskNone),
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actReject, wantCode: domain.CodeRequestNotAllowed},
		{name: "a Pending with less than the minimum notice, by its stored time, is rejected", rec: pending,
			cmd:   domain.Command{ID: "c-11", ResourceID: id, Task: domain.TaskPending, Window: &domain.Window{Start: t0.Add(time.Hour), End: t0.Add(2 * time.Hour)}},
			rules: settings{MinNotice: 24 * time.Hour}, d: delivery{Seq: 11, StoredAt: t0}, want: actReject, wantCode: domain.CodeInvalidParameter},
		{name: "a forced Pending with less than the minimum notice is applied", rec: pending,
			cmd:   domain.Command{ID: "c-11", ResourceID: id, Task: domain.TaskPending, Force: true, Window: &domain.Window{Start: t0.Add(time.Hour), End: t0.Add(2 * time.Hour)}},
			rules: settings{MinNotice: 24 * time.Hour}, d: delivery{Seq: 11, StoredAt: t0}, want: actApply, wantTo: domain.StatePending},
		{name: "a Pending with enough notice is applied", rec: pending,
			cmd:   domain.Command{ID: "c-11", ResourceID: id, Task: domain.TaskPending, Window: &domain.Window{Start: t0.Add(25 * time.Hour), End: t0.Add(26 * time.Hour)}},
			rules: settings{MinNotice: 24 * time.Hour}, d: delivery{Seq: 11, StoredAt: t0}, want: actApply, wantTo: domain.StatePending},
		{name: "over the entity's admission is rejected", rec: drained, cmd: cmd("c-11", domain.TaskNone), rules: settings{Admission: limit},
			d: delivery{Seq: 11, StoredAt: t0.Add(100 * time.Millisecond)}, want: actReject, wantCode: domain.CodeRequestNotAllowed},
		{name: "admission refills by the commands' stored times", rec: drained, cmd: cmd("c-11", domain.TaskNone), rules: settings{Admission: limit},
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actApply, wantTo: domain.StateNone},
		{name: "a signed command issued a moment before it was stored is applied", rec: pending, cmd: signed("c-11", t0.Add(500*time.Millisecond)),
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actApply, wantTo: domain.StateNone},
		{name: "a signed command without issuedAt is refused", rec: pending, cmd: signedRaw("c-11", ""),
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actReject, wantCode: domain.CodeUnauthorized},
		{name: "a signed command older than the max age when stored is refused as expired", rec: pending, cmd: signed("c-11", t0.Add(-16*time.Minute)),
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actReject, wantCode: domain.CodeUnauthorized},
		{name: "a signed command more than a minute ahead of the stream's clock is refused as expired", rec: pending, cmd: signed("c-11", t0.Add(3*time.Minute)),
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actReject, wantCode: domain.CodeUnauthorized},
		{name: "a signed command issued no later than the key's last applied one is a replay", rec: signedBy(pending, t0), cmd: signed("c-replay", t0),
			d: delivery{Seq: 90, StoredAt: t0.Add(5 * time.Minute)}, want: actReject, wantCode: domain.CodeUnauthorized},
		{name: "a later command of the same key is applied", rec: signedBy(pending, t0), cmd: signed("c-11", t0.Add(time.Millisecond)),
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actApply, wantTo: domain.StateNone},
		{name: "a remembered record that would apply is decided on", rec: pending, cmd: cmd("c-11", domain.TaskNone),
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second), Remembered: true}, want: actApply, wantTo: domain.StateNone},
		{name: "a remembered record that would not apply is read again", rec: pending, cmd: cmd("c-11", domain.TaskUpdateSucceeded),
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second), Remembered: true}, want: actReread},
		{name: "a remembered record never decides a duplicate", rec: pending, cmd: cmd("c-10", domain.TaskNone),
			d: delivery{Seq: 12, StoredAt: t0.Add(time.Second), Remembered: true}, want: actReread},

		{name: "refused at the gate: rejected in the record's unchanged state", rec: pending, cmd: cmd("c-11", ""), gate: garbled,
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actReject, wantCode: domain.CodeInvalidRequestContent},
		{name: "refused at the gate with no record to read (an invalid key): rejected in state None", unread: true, cmd: cmd("", ""), gate: badKey,
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actReject, wantCode: domain.CodeInvalidParameter},
		{name: "refused at the gate, a late copy of a command stored before the record's: nothing to do", rec: pending, cmd: cmd("c-9", ""), gate: unsigned,
			d: delivery{Seq: 9, StoredAt: t0.Add(-time.Second)}, want: actSkip},
		{name: "given up while the record cannot be read: dead-lettered, its state not guessed", unread: true, cmd: cmd("c-11", domain.TaskNone), gaveUp: "bucket unreachable",
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actDeadLetter},
		{name: "given up on the next command: dead-lettered in the record's state", rec: pending, cmd: cmd("c-11", domain.TaskNone), gaveUp: "gave up after 10 deliveries",
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actDeadLetter},
		{name: "given up once the record was written, only the outcome failing: the applied outcome again", rec: pending, cmd: cmd("c-10", domain.TaskPending), gaveUp: "publish outcome event: timeout",
			d: delivery{Seq: 10, StoredAt: t0}, want: actRepublish},
		{name: "given up on a late copy of an older command: nothing to do", rec: pending, cmd: cmd("c-9", domain.TaskNone), gaveUp: "lease lost",
			d: delivery{Seq: 9, StoredAt: t0.Add(-time.Second)}, want: actSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := t0.Add(time.Hour)
			if tc.rules.MaxCommandAge == 0 {
				tc.rules.MaxCommandAge = 15 * time.Minute
			}
			var rec *domain.Record
			if !tc.unread {
				rec = &tc.rec
			}
			var dec decision
			switch {
			case tc.gate != nil:
				dec = decideRejection(rec, tc.cmd, tc.gate, tc.d, at)
			case tc.gaveUp != "":
				dec = decideDeadLetter(rec, tc.cmd, tc.gaveUp, tc.d, at)
			default:
				dec = decide(tc.rec, tc.cmd, tc.d, tc.rules, at)
			}
			if dec.Action != tc.want {
				t.Fatalf("action %s (%s), want %s", dec.Action, dec.Why, tc.want)
			}
			state := tc.rec.State // unchanged by a refusal or a dead letter
			if tc.unread && tc.gate != nil {
				state = domain.StateNone
			}
			switch dec.Action {
			case actApply:
				n := dec.Next
				if n.State != tc.wantTo || n.LastCommandSeq != tc.d.Seq || n.LastCommandID != tc.cmd.ID || !n.LastCommandAt.Equal(tc.d.StoredAt) || !n.Seen(tc.cmd.ID) {
					t.Errorf("next record %+v", n)
				}
				if n.LastEvent == nil || n.LastEvent.Outcome != domain.OutcomeApplied || n.LastEvent.CommandSeq != tc.d.Seq || !n.Follows(tc.rec) {
					t.Errorf("next record's event %+v, or it does not follow the record", n.LastEvent)
				}
				if dec.Event.To != tc.wantTo || dec.Event.CommandSeq != tc.d.Seq {
					t.Errorf("event %+v", dec.Event)
				}
			case actReject:
				if dec.Event.Outcome != domain.OutcomeRejected || dec.Event.Code != tc.wantCode || dec.Event.From != state || dec.Event.To != state || dec.Event.CommandSeq != tc.d.Seq {
					t.Errorf("event %+v, want rejected %s in the unchanged state %q", dec.Event, tc.wantCode, state)
				}
			case actDeadLetter:
				if dec.Event.Outcome != domain.OutcomeDeadLettered || dec.Event.Message != tc.gaveUp || dec.Event.From != state || dec.Event.To != state || dec.Event.CommandSeq != tc.d.Seq {
					t.Errorf("event %+v, want dead_lettered for %q in the unchanged state %q", dec.Event, tc.gaveUp, state)
				}
			case actRepublish:
				if *tc.rec.LastEvent != dec.Event {
					t.Errorf("republished %+v, want the record's last event %+v", dec.Event, *tc.rec.LastEvent)
				}
			case actDuplicate:
				if dec.Event.Outcome != domain.OutcomeDuplicate || dec.Event.CommandSeq != tc.d.Seq {
					t.Errorf("event %+v", dec.Event)
				}
			}
		})
	}
}

// TestDecide_SameInputsSameDecision: a replica that comes back from a partition decides a
// command it still holds exactly as the replica that decided it meanwhile, whatever its clock.
func TestDecide_SameInputsSameDecision(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rec := domain.Record{State: domain.StatePending, LastCommandSeq: 7, LastCommandAt: t0, AdmitTokens: 0.2, AdmitAt: t0}
	c := domain.Command{ID: "c-8", ResourceID: "/r", Task: domain.TaskNone}
	d := delivery{Seq: 8, StoredAt: t0.Add(200 * time.Millisecond)}
	rules := settings{Admission: domain.Admission{Rate: 1, Burst: 5}, MaxCommandAge: time.Minute}
	first := decide(rec, c, d, rules, t0.Add(time.Second))
	late := decide(rec, c, d, rules, t0.Add(10*time.Minute))
	if first.Action != actReject || late.Action != first.Action || late.Event.Code != first.Event.Code {
		t.Fatalf("decided %s then %s", first.Action, late.Action)
	}
}

// TestDecide_SignedUpToStaysSmall: the replay memory keeps one time per key, and forgets a key
// whose last command is past any command's age, so it does not grow with the commands.
func TestDecide_SignedUpToStaysSmall(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rules := settings{MaxCommandAge: 15 * time.Minute}
	rec := domain.Record{State: domain.StateNone}
	for i := range 1000 {
		at := t0.Add(time.Duration(i) * time.Minute)
		key := []string{"UADMIN", "UUPDATER"}[i%2]
		if i > 500 {
			key = "UADMIN" // the updater's key is retired
		}
		task := []domain.Task{domain.TaskPending, domain.TaskNone}[i%2]
		c := domain.Command{ID: fmt.Sprintf("c-%d", i), ResourceID: "/r", Task: task, IssuedAt: at.Format(time.RFC3339Nano), SignerKey: key}
		dec := decide(rec, c, delivery{Seq: uint64(i + 1), StoredAt: at.Add(time.Second)}, rules, at)
		if dec.Action != actApply {
			t.Fatalf("command %d: %s (%s) %+v", i, dec.Action, dec.Why, dec.Event)
		}
		rec = dec.Next
	}
	if len(rec.SignedUpTo) != 1 || len(rec.RecentCommandIDs) != domain.RecentIDs {
		t.Fatalf("after 1,000 commands: %d keys remembered %v, %d ids", len(rec.SignedUpTo), rec.SignedUpTo, len(rec.RecentCommandIDs))
	}
}
