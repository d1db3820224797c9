package subscriptions

import (
	"strings"
	"testing"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/subscription"
)

// TestDecide is every exactly-once rule of the subscriptions function as a row: the name's
// revision, the command and the delivery in, the decision out, without a broker.
func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	const (
		rg     = "/subscriptions/s1/resourceGroups/rg-a"
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	)
	key := "s1.rg-a.crm"
	decode := func(body string) subscription.Command {
		c, rej := subscription.DecodeCommand([]byte(body), key, "")
		if rej != nil {
			t.Fatalf("%s: %v", body, rej)
		}
		return c
	}
	create := func(id string) subscription.Command {
		return decode(`{"id": "` + id + `", "action": "create", "name": "crm", "scope": "` + rg + `", "url": "https://hooks.example.com/in", "secret": "` + secret + `", "states": ["Pending"]}`)
	}
	del := func(id, scope string) subscription.Command {
		return decode(`{"id": "` + id + `", "action": "delete", "name": "crm", "scope": "` + scope + `"}`)
	}
	signed := func(c subscription.Command, issued time.Time) subscription.Command {
		c.SignerKey, c.IssuedAt = "UKEY", issued.Format(time.RFC3339Nano)
		return c
	}
	// wrote is the revision command s-10, stored at seq 10, wrote: the subscription (a create)
	// or its delete.
	wrote := func(rev uint64, deleted bool) current {
		m := domain.SubscriptionMeta{At: t0.Add(time.Second), Actor: "ops"}
		m.LastCommandID, m.LastCommandSeq, m.LastCommandAt = "s-10", 10, t0
		m.Remember("s-10")
		c := current{Rev: rev, Deleted: deleted, Meta: m}
		if !deleted {
			c.Record = subscription.Record{Name: "crm", Scope: rg, Delivery: "crm~0123456789ab", CommandID: "s-10", CommandSeq: 10}
		}
		return c
	}
	forgot := wrote(7, true)
	forgot.Meta.SignedForgotten = t0
	later := delivery{Seq: 11, StoredAt: t0.Add(time.Minute)}
	for _, tc := range []struct {
		name     string
		cur      current
		cmd      subscription.Command
		d        delivery
		want     action
		code     domain.Code
		target   string
		rev      uint64
		isDelete bool
	}{
		{name: "the first create of a name is applied", cmd: create("s-1"), d: delivery{Seq: 1, StoredAt: t0}, want: actApply},
		{name: "a create after a delete is applied", cur: wrote(7, true), cmd: create("s-11"), d: later, want: actApply},
		{name: "a create while the name has a subscription is refused", cur: wrote(7, false), cmd: create("s-11"), d: later, want: actReject, code: domain.CodeRequestNotAllowed, target: "name", rev: 7},
		{name: "a delete is applied, and written as a delete", cur: wrote(7, false), cmd: del("s-11", rg), d: later, want: actApply, isDelete: true},
		{name: "a delete of the scope cased otherwise is applied", cur: wrote(7, false), cmd: del("s-11", strings.ToUpper(rg[:14])+rg[14:]), d: later, want: actApply, isDelete: true},
		{name: "a delete of a name without a subscription is refused", cmd: del("s-1", rg), d: delivery{Seq: 1, StoredAt: t0}, want: actReject, code: domain.CodeInvalidParameter, target: "name"},
		{name: "a delete of a deleted subscription is refused", cur: wrote(7, true), cmd: del("s-11", rg), d: later, want: actReject, code: domain.CodeInvalidParameter, target: "name", rev: 7},
		{name: "a delete naming a resource of the scope is refused: the subscription's scope is wider", cur: wrote(7, false),
			cmd: del("s-11", rg+"/providers/p/clusters/c1"), d: later, want: actReject, code: domain.CodeInvalidParameter, target: "scope", rev: 7},
		{name: "the command that wrote the revision, delivered again, publishes its outcome again", cur: wrote(7, false), cmd: create("s-10"), d: delivery{Seq: 10, StoredAt: t0}, want: actRepublish, rev: 7},
		{name: "a delete that wrote the revision, delivered again, publishes its outcome again", cur: wrote(7, true), cmd: del("s-10", rg), d: delivery{Seq: 10, StoredAt: t0}, want: actRepublish, rev: 7, isDelete: true},
		{name: "a command stored before the one the revision holds was handled: nothing to do", cur: wrote(7, false), cmd: create("s-9"), d: delivery{Seq: 9, StoredAt: t0.Add(-time.Second)}, want: actSkip},
		{name: "an id applied before, stored again later, is a duplicate", cur: wrote(7, false), cmd: create("s-10"), d: delivery{Seq: 30, StoredAt: t0.Add(time.Hour)}, want: actDuplicate, rev: 7},
		{name: "a signed command within its age is applied", cmd: signed(create("s-1"), t0), d: delivery{Seq: 1, StoredAt: t0.Add(time.Minute)}, want: actApply},
		{name: "a signed command older than the command age is refused", cmd: signed(create("s-1"), t0), d: delivery{Seq: 1, StoredAt: t0.Add(time.Hour)}, want: actReject, code: domain.CodeUnauthorized},
		{name: "a signed command issued no later than one forgotten is refused", cur: forgot, cmd: signed(create("s-11"), t0), d: later, want: actReject, code: domain.CodeUnauthorized, rev: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := t0.Add(2 * time.Minute)
			dec := decide(tc.cur, tc.cmd, tc.d, 15*time.Minute, at)
			if dec.Action != tc.want {
				t.Fatalf("action %s (%s; %s), want %s", dec.Action, dec.Why, dec.Event.Message, tc.want)
			}
			if dec.Action == actSkip {
				return
			}
			ev := dec.Event
			if ev.CommandID != tc.cmd.ID || ev.Name != "crm" || ev.CommandSeq != tc.d.Seq || ev.Code != tc.code || ev.Target != tc.target || ev.Revision != tc.rev {
				t.Errorf("event %+v, want command %s seq %d code %q target %q revision %d", ev, tc.cmd.ID, tc.d.Seq, tc.code, tc.target, tc.rev)
			}
			if dec.Delete != tc.isDelete {
				t.Errorf("delete %t, want %t", dec.Delete, tc.isDelete)
			}
			switch dec.Action {
			case actApply:
				checkApply(t, tc.cur, tc.cmd, tc.d, dec, at)
			case actRepublish:
				if !ev.At.Equal(tc.cur.Meta.At) || ev.Outcome != domain.OutcomeApplied || ev.Delivery != tc.cur.Record.Delivery {
					t.Errorf("republished %+v: the applied outcome at %s, as first published", ev, tc.cur.Meta.At)
				}
			}
		})
	}
}

// checkApply checks an applied decision: the ledger names the command, a create's record starts
// at the command's stored time and holds no secret, which goes apart.
func checkApply(t *testing.T, cur current, cmd subscription.Command, d delivery, dec decision, at time.Time) {
	t.Helper()
	m := dec.Meta
	if m.LastCommandID != cmd.ID || m.LastCommandSeq != d.Seq || !m.LastCommandAt.Equal(d.StoredAt) || m.Prev != cur.Rev || !m.Seen(cmd.ID) || !m.At.Equal(at) {
		t.Errorf("meta %+v does not name the command, its revision before and its time", m)
	}
	if cmd.SignerKey != "" && len(m.SignedIDs) != 1 {
		t.Errorf("signed ids %v: the signed command is remembered", m.SignedIDs)
	}
	if dec.Delete {
		if dec.Value != nil || dec.Secret != "" {
			t.Errorf("a delete writes %s and a secret", dec.Value)
		}
		return
	}
	rec, err := subscription.DecodeRecord(dec.Value)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(dec.Value), cmd.Secret) || dec.Secret != cmd.Secret {
		t.Errorf("the record holds the secret, or the secret is not written apart: %s", dec.Value)
	}
	wantDelivery := domain.SubscriptionDelivery(cmd.Key(), cmd.ID, d.Seq)
	if rec.Name != cmd.Name || rec.Scope != cmd.Scope || !rec.CreatedAt.Equal(d.StoredAt) || rec.CommandSeq != d.Seq ||
		rec.Delivery != wantDelivery || dec.Event.Delivery != wantDelivery || len(rec.States) != 1 {
		t.Errorf("record %+v, event %+v", rec, dec.Event)
	}
}

// TestDecide_SameInputsSameDecision: a redelivery, or another replica, decides alike whatever
// its clock: at stamps only the outcomes.
func TestDecide_SameInputsSameDecision(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	c, rej := subscription.DecodeCommand([]byte(`{"id": "s-1", "action": "create", "name": "crm", "scope": "/subscriptions/s1", "url": "https://x.example/in", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}`), "s1._.crm", "")
	if rej != nil {
		t.Fatal(rej)
	}
	d := delivery{Seq: 1, StoredAt: t0}
	a := decide(current{}, c, d, time.Minute, t0.Add(time.Second))
	b := decide(current{}, c, d, time.Minute, t0.Add(time.Hour))
	if a.Action != b.Action || string(a.Value) != string(b.Value) || a.Meta.LastCommandSeq != b.Meta.LastCommandSeq || a.Event.Delivery != b.Event.Delivery {
		t.Errorf("two deliveries decided %v and %v", a, b)
	}
}
