package command

import (
	"fmt"
	"math/rand/v2"
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
	// signedWith is r remembering signed commands c-1, c-2 … issued at the given times.
	signedWith := func(r domain.Record, issued ...time.Time) domain.Record {
		for i, at := range issued {
			r.RememberSigned(fmt.Sprintf("c-%d", i+1), at, time.Time{})
		}
		return r
	}
	forgot := pending
	forgot.SignedForgotten = t0
	legacy := pending
	legacy.SignedUpTo = map[string]time.Time{"UKEY": t0, "UOTHER": t0.Add(-time.Minute)}
	signedPending := applied(domain.StatePending, "c-1", 10, t0)
	signedPending = signedWith(signedPending, t0)
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
		{name: "a signed command the record remembers, sent again after more newer commands than the last ids, is a duplicate", rec: signedWith(pending, t0), cmd: signed("c-1", t0),
			d: delivery{Seq: 90, StoredAt: t0.Add(5 * time.Minute)}, want: actDuplicate},
		{name: "a new signed command stamped with the same whole second as the last one of its key is applied", rec: signedWith(pending, t0), cmd: signedRaw("c-11", t0.Format(time.RFC3339)),
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actApply, wantTo: domain.StateNone},
		{name: "a new signed command issued 30 s before the last one of its key (another sender's clock) is applied", rec: signedWith(pending, t0), cmd: signed("c-11", t0.Add(-30*time.Second)),
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actApply, wantTo: domain.StateNone},
		{name: "a dead letter sent again after newer signed commands, within its age, is applied", rec: signedWith(pending, t0.Add(time.Minute), t0.Add(2*time.Minute)), cmd: signed("c-dead", t0),
			d: delivery{Seq: 40, StoredAt: t0.Add(10 * time.Minute)}, want: actApply, wantTo: domain.StateNone},
		{name: "a signed command issued no later than the newest one the record forgot is refused", rec: forgot, cmd: signed("c-11", t0),
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actReject, wantCode: domain.CodeUnauthorized},
		{name: "a record of the per-key memory refuses a signed command issued no later than its newest time", rec: legacy, cmd: signed("c-11", t0),
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actReject, wantCode: domain.CodeUnauthorized},
		{name: "a record of the per-key memory applies a later signed command and keeps its time as forgotten", rec: legacy, cmd: signed("c-11", t0.Add(time.Millisecond)),
			d: delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, want: actApply, wantTo: domain.StateNone},
		{name: "the signed command applied last, delivered again (same sequence), republishes its outcome", rec: signedPending, cmd: signed("c-1", t0),
			d: delivery{Seq: 10, StoredAt: t0}, want: actRepublish},
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
			dec := decideAny(tc.rec, tc.unread, tc.cmd, tc.d, tc.rules, tc.gate, tc.gaveUp, at)
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
				if tc.cmd.SignerKey != "" {
					last := n.SignedIDs[len(n.SignedIDs)-1]
					if last.ID != tc.cmd.ID || last.IssuedAt.Format(time.RFC3339Nano) != tc.cmd.IssuedAt || n.SignedUpTo != nil || n.SignedForgottenUpTo().Before(tc.rec.SignedForgottenUpTo()) {
						t.Errorf("next record's signed memory %+v, forgotten up to %s", n.SignedIDs, n.SignedForgottenUpTo())
					}
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

// TestDecide_SignedMemoryIsBounded: the record remembers the signed commands within the age
// window only, and never more than MaxSignedIDs, whatever the rate; what it forgets is
// covered by SignedForgotten.
func TestDecide_SignedMemoryIsBounded(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rules := settings{MaxCommandAge: 15 * time.Minute}
	// run applies n signed commands, the i-th issued at issued(i) and stored a second later.
	run := func(n int, issued func(i int) time.Time) domain.Record {
		t.Helper()
		rec := domain.Record{State: domain.StateNone}
		for i := range n {
			at := issued(i)
			key := []string{"UADMIN", "UUPDATER"}[i%2]
			c := domain.Command{ID: fmt.Sprintf("c-%d", i), ResourceID: "/r", Task: alternate(rec), IssuedAt: at.Format(time.RFC3339Nano), SignerKey: key}
			dec := decide(rec, c, delivery{Seq: uint64(i + 1), StoredAt: at.Add(time.Second)}, rules, at)
			if dec.Action != actApply {
				t.Fatalf("command %d: %s (%s) %+v", i, dec.Action, dec.Why, dec.Event)
			}
			rec = dec.Next
		}
		return rec
	}

	// One a minute: those issued within the age and the skew (16 min) of the last stored time.
	rec := run(1000, func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) })
	last := t0.Add(999 * time.Minute)
	if len(rec.SignedIDs) != 16 || rec.SignedIDs[0].ID != "c-984" || !rec.SignedForgotten.Equal(t0.Add(983*time.Minute)) || len(rec.RecentCommandIDs) != domain.RecentIDs {
		t.Fatalf("one a minute, last issued %s: %d signed remembered from %+v, forgotten up to %s, %d ids", last, len(rec.SignedIDs), rec.SignedIDs[0], rec.SignedForgotten, len(rec.RecentCommandIDs))
	}

	// An unsigned command stored past the age of them all: every one forgotten.
	c := domain.Command{ID: "unsigned", ResourceID: "/r", Task: alternate(rec)}
	dec := decide(rec, c, delivery{Seq: 1001, StoredAt: last.Add(17 * time.Minute)}, rules, last)
	if dec.Action != actApply || dec.Next.SignedIDs != nil || !dec.Next.SignedForgotten.Equal(last) {
		t.Fatalf("unsigned command past the age: %s, %d remembered, forgotten up to %s", dec.Action, len(dec.Next.SignedIDs), dec.Next.SignedForgotten)
	}

	// A thousand within a few seconds: the newest MaxSignedIDs, the rest forgotten.
	rec = run(1000, func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) })
	if len(rec.SignedIDs) != domain.MaxSignedIDs || !rec.SignedForgotten.Equal(t0.Add(time.Duration(999-domain.MaxSignedIDs)*time.Millisecond)) {
		t.Fatalf("a thousand in a second: %d remembered, forgotten up to %s", len(rec.SignedIDs), rec.SignedForgotten)
	}
	b, _ := domain.EncodeRecord(rec)
	t.Logf("a record remembering %d signed commands (ids of 5 characters): %d bytes", len(rec.SignedIDs), len(b))
}

// alternate is a task that always applies on rec: Pending, then None.
func alternate(rec domain.Record) domain.Task {
	if rec.State == domain.StatePending {
		return domain.TaskNone
	}
	return domain.TaskPending
}

// TestDecide_OnlyReplaysAreRefused drives one entity through thousands of signed commands as
// senders send them: several sharing a key with clocks up to 30 s apart, stamping whole seconds,
// many within one stored second, mixed with copies of bodies applied before, sent again at any
// later time. Every new command is applied, in stream order; no copy ever is.
func TestDecide_OnlyReplaysAreRefused(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rules := settings{MaxCommandAge: 15 * time.Minute, Admission: domain.Admission{Rate: 20, Burst: 200}}
	rng := rand.New(rand.NewPCG(21, 1))
	skews := []time.Duration{0, -30 * time.Second, 30 * time.Second} // the senders' clocks
	rec := domain.Record{State: domain.StateNone}
	var sent []domain.Command
	stored := t0
	fresh, copies, limited := 0, 0, 0
	for seq := uint64(1); seq <= 5000; seq++ {
		if rng.IntN(10) == 0 { // a pause, sometimes longer than the age
			stored = stored.Add(time.Duration(rng.IntN(1200)) * time.Second)
		} else {
			stored = stored.Add(time.Duration(rng.IntN(100)) * time.Millisecond)
		}
		d := delivery{Seq: seq, StoredAt: stored}
		if len(sent) > 0 && rng.IntN(3) == 0 {
			c := sent[rng.IntN(len(sent))]
			if dec := decide(rec, c, d, rules, stored); dec.Action == actApply {
				t.Fatalf("a copy of %s (issued %s) stored at %s was applied again", c.ID, c.IssuedAt, stored)
			}
			copies++
			continue
		}
		issued := stored.Add(skews[rng.IntN(len(skews))]).Truncate(time.Second)
		c := domain.Command{ID: fmt.Sprintf("c-%d", seq), ResourceID: "/r", Task: alternate(rec), IssuedAt: issued.Format(time.RFC3339), SignerKey: "UKEY"}
		dec := decide(rec, c, d, rules, stored)
		if dec.Action == actReject && dec.Event.Message == domain.TooMany().Message {
			limited++ // over the entity's admission: refused for the rate, not as a replay
			continue
		}
		if dec.Action != actApply {
			t.Fatalf("new command %s issued %s, stored %s: %s (%s) %s", c.ID, c.IssuedAt, stored, dec.Action, dec.Why, dec.Event.Message)
		}
		rec = dec.Next
		sent = append(sent, c)
		fresh++
	}
	t.Logf("%d new commands applied, %d over the admission, %d copies refused; %d signed remembered at the end", fresh, limited, copies, len(rec.SignedIDs))
}

// TestDecide_BurstInOneSecondIsApplied: a hundred commands of one key stamped with the same
// whole second and stored within it are all applied; a copy of each, later, is not.
func TestDecide_BurstInOneSecondIsApplied(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rules := settings{MaxCommandAge: 15 * time.Minute, Admission: domain.Admission{Rate: 20, Burst: 200}}
	rec := domain.Record{State: domain.StateNone}
	var burst []domain.Command
	for i := range 100 {
		c := domain.Command{ID: fmt.Sprintf("c-%d", i), ResourceID: "/r", Task: alternate(rec), IssuedAt: t0.Format(time.RFC3339), SignerKey: "UKEY"}
		dec := decide(rec, c, delivery{Seq: uint64(i + 1), StoredAt: t0.Add(time.Duration(i) * 5 * time.Millisecond)}, rules, t0)
		if dec.Action != actApply {
			t.Fatalf("command %d of the burst: %s (%s) %s", i, dec.Action, dec.Why, dec.Event.Message)
		}
		rec = dec.Next
		burst = append(burst, c)
	}
	for i, c := range burst {
		dec := decide(rec, c, delivery{Seq: uint64(200 + i), StoredAt: t0.Add(10 * time.Minute)}, rules, t0)
		if dec.Action != actDuplicate {
			t.Fatalf("copy of %s: %s (%s), want a duplicate", c.ID, dec.Action, dec.Why)
		}
	}
}

// BenchmarkDecide_SignedMemory is what the memory of signed commands costs a command, by how
// many the record holds: decode the record, decide a signed command, encode the next record
// (go test ./functions/command -run X -bench SignedMemory).
func BenchmarkDecide_SignedMemory(b *testing.B) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, n := range []int{0, 1, 16, domain.MaxSignedIDs} {
		b.Run(fmt.Sprintf("remembered=%d", n), func(b *testing.B) {
			rec := domain.Record{State: domain.StateNone}
			for i := range n {
				rec.RememberSigned(fmt.Sprintf("tp12345-%d", i), t0.Add(time.Duration(i)*time.Millisecond), time.Time{})
				rec.Remember(fmt.Sprintf("tp12345-%d", i))
			}
			raw, _ := domain.EncodeRecord(rec)
			for i := 0; b.Loop(); i++ {
				r, err := domain.DecodeRecord(raw)
				if err != nil {
					b.Fatal(err)
				}
				c := domain.Command{ID: fmt.Sprintf("x-%d", i), ResourceID: "/r", Task: alternate(r), IssuedAt: t0.Add(time.Second).Format(time.RFC3339Nano), SignerKey: "UKEY"}
				dec := decide(r, c, delivery{Seq: 1 << 40, StoredAt: t0.Add(2 * time.Second)}, settings{MaxCommandAge: 15 * time.Minute}, t0)
				if dec.Action != actApply {
					b.Fatal(dec.Why)
				}
				if _, err := domain.EncodeRecord(dec.Next); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(raw)), "record-bytes")
		})
	}
}

// TestDecide_RefusalOnRedeliveryIsFenced: a refusal decided on a redelivery is written into
// the record before it is published (actFence), so that a replica that held the command before
// and decided to apply it on the same revision cannot commit it late; the record then answers
// every later delivery of the command with that refusal. On a first delivery a refusal writes
// nothing.
func TestDecide_RefusalOnRedeliveryIsFenced(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const id = "/subscriptions/s/resourceGroups/rg/providers/p/c1"
	ev := domain.Event{CommandID: "c-10", Outcome: domain.OutcomeApplied, To: domain.StatePending, CommandSeq: 10}
	pending := domain.Record{ResourceID: id, State: domain.StatePending, Window: &domain.Window{Start: t0.Add(48 * time.Hour), End: t0.Add(50 * time.Hour)},
		LastCommandID: "c-10", LastCommandSeq: 10, LastCommandAt: t0, UpdatedAt: t0, StateSince: t0, LastEvent: &ev}
	pending.Remember("c-10")
	none := domain.Record{State: domain.StateNone} // what the store reads for a key without a value
	succeeded := domain.Command{ID: "c-11", ResourceID: id, Task: domain.TaskUpdateSucceeded}
	soon := domain.Command{ID: "c-11", ResourceID: id, Task: domain.TaskPending, Window: &domain.Window{Start: t0.Add(time.Hour), End: t0.Add(2 * time.Hour)}}
	first := delivery{Seq: 11, StoredAt: t0.Add(time.Second)}
	again := first
	again.Redelivered = true
	notice := settings{MinNotice: 24 * time.Hour, MaxCommandAge: 15 * time.Minute}
	garbled := &domain.Rejection{Code: domain.CodeInvalidRequestContent, Message: "not JSON"}

	for _, tc := range []struct {
		name    string
		rec     domain.Record
		unread  bool
		cmd     domain.Command
		d       delivery
		rules   settings
		gate    *domain.Rejection
		gaveUp  string
		want    action
		outcome domain.Outcome
		// tombstone: the fence stands in a record the entity did not have (out of the signal).
		tombstone bool
	}{
		{name: "a refusal on a redelivery is fenced", rec: pending, cmd: succeeded, d: again, want: actFence, outcome: domain.OutcomeRejected},
		{name: "a refusal on a first delivery writes nothing", rec: pending, cmd: succeeded, d: first, want: actReject, outcome: domain.OutcomeRejected},
		{name: "a policy's refusal on a redelivery is fenced", rec: pending, cmd: soon, d: again, rules: notice, want: actFence, outcome: domain.OutcomeRejected},
		{name: "a refusal on a redelivery of an entity without a record is fenced by a tombstone", rec: none, cmd: soon, d: again, rules: notice,
			want: actFence, outcome: domain.OutcomeRejected, tombstone: true},
		{name: "a refusal at the gate on a redelivery is fenced", rec: pending, cmd: succeeded, d: again, gate: garbled, want: actFence, outcome: domain.OutcomeRejected},
		{name: "a refusal at the gate on a redelivery without a key to write is not fenced", unread: true, cmd: succeeded, d: again, gate: garbled, want: actReject, outcome: domain.OutcomeRejected},
		{name: "a dead letter on a redelivery is fenced", rec: pending, cmd: succeeded, d: again, gaveUp: "gave up after 10 deliveries", want: actFence, outcome: domain.OutcomeDeadLettered},
		{name: "a dead letter whose record cannot be read is not fenced", unread: true, cmd: succeeded, d: again, gaveUp: "record does not decode", want: actDeadLetter, outcome: domain.OutcomeDeadLettered},
		{name: "a redelivered command that applies is applied", rec: pending, cmd: domain.Command{ID: "c-11", ResourceID: id, Task: domain.TaskNone}, d: again, want: actApply, outcome: domain.OutcomeApplied},
		{name: "a duplicate on a redelivery writes nothing", rec: pending, cmd: domain.Command{ID: "c-10", ResourceID: id, Task: domain.TaskNone}, d: again, want: actDuplicate, outcome: domain.OutcomeDuplicate},
		{name: "a remembered record that would refuse is read again, not fenced", rec: pending, cmd: succeeded,
			d: delivery{Seq: 11, StoredAt: first.StoredAt, Redelivered: true, Remembered: true}, want: actReread},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := t0.Add(time.Hour)
			dec := decideAny(tc.rec, tc.unread, tc.cmd, tc.d, tc.rules, tc.gate, tc.gaveUp, at)
			if dec.Action != tc.want {
				t.Fatalf("action %s (%s), want %s", dec.Action, dec.Why, tc.want)
			}
			if tc.want != actReread && (dec.Event.Outcome != tc.outcome || dec.Event.CommandSeq != tc.d.Seq || dec.Event.CommandID != tc.cmd.ID) {
				t.Fatalf("event %+v, want %s of %s at seq %d", dec.Event, tc.outcome, tc.cmd.ID, tc.d.Seq)
			}
			if dec.Action != actFence {
				if dec.Action != actApply && dec.Next.Fence != nil {
					t.Fatalf("a decision that writes no fence carries one: %+v", dec.Next.Fence)
				}
				return
			}
			fence := dec.Next
			if fence.Fence == nil || fence.Fence.Event != dec.Event || !fence.Fence.StoredAt.Equal(tc.d.StoredAt) || !fence.Follows(tc.rec) {
				t.Fatalf("fence %+v does not hold the refusal %+v, or does not follow the record", fence.Fence, dec.Event)
			}
			if tc.tombstone != fence.Forgotten() || (tc.tombstone && fence.ResourceID != tc.cmd.ResourceID) {
				t.Fatalf("fence record forgotten=%v (resource %q), want a tombstone: %v", fence.Forgotten(), fence.ResourceID, tc.tombstone)
			}
			if !tc.tombstone && (fence.State != tc.rec.State || fence.LastCommandID != tc.rec.LastCommandID || fence.Window != tc.rec.Window || !fence.UpdatedAt.Equal(tc.rec.UpdatedAt)) {
				t.Fatalf("fence record %+v changed what the record says of the entity %+v", fence, tc.rec)
			}
			// Every later delivery of the command, whoever decides it and however, finds its
			// refusal: the same outcome again, never an application.
			for _, d := range []delivery{first, again} {
				for _, how := range []struct {
					gate   *domain.Rejection
					gaveUp string
				}{{}, {gate: garbled}, {gaveUp: "lease lost"}} {
					got := decideAny(fence, false, tc.cmd, d, settings{}, how.gate, how.gaveUp, at)
					if got.Action != actRepublish || got.Event != dec.Event {
						t.Errorf("the fenced command again (redelivered %v, gate %v, gave up %q): %s %+v, want its refusal republished", d.Redelivered, how.gate != nil, how.gaveUp, got.Action, got.Event)
					}
				}
			}
			if got := decide(fence, domain.Command{ID: "c-9", ResourceID: id, Task: domain.TaskNone}, delivery{Seq: 9, StoredAt: t0, Redelivered: true}, tc.rules, at); got.Action != actSkip {
				t.Errorf("a command stored before the fenced one: %s, want skip", got.Action)
			}
			next := decide(fence, domain.Command{ID: "c-12", ResourceID: id, Task: domain.TaskNone, Force: true}, delivery{Seq: 12, StoredAt: first.StoredAt.Add(time.Second)}, settings{MaxCommandAge: 15 * time.Minute}, at)
			if next.Action != actApply || next.Next.Fence != nil || next.Next.Forgotten() || !next.Next.Follows(fence) {
				t.Errorf("the next command after the fence: %s, fence %+v, forgotten %v; want applied, the fence dropped", next.Action, next.Next.Fence, next.Next.Forgotten())
			}
		})
	}
}

// decideAny decides as the handler would: at the gate (gate), given up (gaveUp) or in full;
// unread: no record could be read (a refusal only). A zero MaxCommandAge takes 15 minutes.
func decideAny(rec domain.Record, unread bool, cmd domain.Command, d delivery, rules settings, gate *domain.Rejection, gaveUp string, at time.Time) decision {
	if rules.MaxCommandAge == 0 {
		rules.MaxCommandAge = 15 * time.Minute
	}
	read := &rec
	if unread {
		read = nil
	}
	switch {
	case gate != nil:
		return decideRejection(read, cmd, gate, d, at)
	case gaveUp != "":
		return decideDeadLetter(read, cmd, gaveUp, d, at)
	}
	return decide(rec, cmd, d, rules, at)
}
