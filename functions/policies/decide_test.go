package policies

import (
	"strings"
	"testing"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// TestDecide is every exactly-once rule of the policies function as a row: the scope's revision,
// the command and the delivery in, the decision out, without a broker.
func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	const scope = "/subscriptions/s1/resourceGroups/rg-a"
	key := domain.MustKey(scope)
	decode := func(body string) policy.Command {
		c, rej := policy.DecodeCommand([]byte(body), key, "")
		if rej != nil {
			t.Fatalf("%s: %v", body, rej)
		}
		return c
	}
	set := func(id string) policy.Command {
		return decode(`{"id": "` + id + `", "scope": "` + scope + `", "policy": {"minNotice": "48h"}}`)
	}
	del := func(id string) policy.Command {
		return decode(`{"id": "` + id + `", "scope": "` + scope + `", "policy": null}`)
	}
	closed := decode(`{"id": "p-11", "scope": "` + scope + `", "policy": {"windows": [{"rrule": "FREQ=MONTHLY;BYMONTHDAY=1", "start": "00:00", "duration": "24h"}]}}`)
	signed := func(id string, issued time.Time) policy.Command {
		c := set(id)
		c.SignerKey, c.IssuedAt = "UKEY", issued.Format(time.RFC3339Nano)
		return c
	}
	// wrote is the revision a command p-10 stored at seq 10 wrote.
	wrote := func(rev uint64, deleted bool) current {
		m := domain.PolicyMeta{At: t0.Add(time.Second), Actor: "ops"}
		m.LastCommandID, m.LastCommandSeq, m.LastCommandAt = "p-10", 10, t0
		m.Remember("p-10")
		return current{Rev: rev, Deleted: deleted, Meta: m, StoredAt: t0.Add(time.Second)}
	}
	forgot := wrote(7, false)
	forgot.Meta.SignedForgotten = t0
	for _, tc := range []struct {
		name     string
		cur      current
		cmd      policy.Command
		d        delivery
		want     action
		code     domain.Code
		target   string
		rev      uint64
		isDelete bool
	}{
		{name: "the first policy of a scope is applied", cmd: set("p-1"), d: delivery{Seq: 1, StoredAt: t0}, want: actApply},
		{name: "the next command in stream order is applied over the revision", cur: wrote(7, false), cmd: set("p-11"), d: delivery{Seq: 11, StoredAt: t0.Add(time.Minute)}, want: actApply},
		{name: "a delete is applied, and written as a delete", cur: wrote(7, false), cmd: del("p-11"), d: delivery{Seq: 11, StoredAt: t0.Add(time.Minute)}, want: actApply, isDelete: true},
		{name: "a delete of a scope without a policy is applied too (its id is remembered)", cmd: del("p-1"), d: delivery{Seq: 1, StoredAt: t0}, want: actApply, isDelete: true},
		{name: "the command that wrote the revision, delivered again, publishes its outcome again", cur: wrote(7, false), cmd: set("p-10"), d: delivery{Seq: 10, StoredAt: t0}, want: actRepublish, rev: 7},
		{name: "a delete that wrote the revision, delivered again, publishes its outcome again", cur: wrote(7, true), cmd: del("p-10"), d: delivery{Seq: 10, StoredAt: t0}, want: actRepublish, rev: 7},
		{name: "a command stored before the one the revision holds was handled: nothing to do", cur: wrote(7, false), cmd: set("p-9"), d: delivery{Seq: 9, StoredAt: t0.Add(-time.Second)}, want: actSkip},
		{name: "an id applied before, stored again later, is a duplicate", cur: wrote(7, false), cmd: set("p-10"), d: delivery{Seq: 30, StoredAt: t0.Add(time.Hour)}, want: actDuplicate, rev: 7},
		{name: "a policy that blocks maintenance for good is refused on windows", cur: wrote(7, false), cmd: closed, d: delivery{Seq: 11, StoredAt: t0.Add(time.Minute)}, want: actReject, code: domain.CodeInvalidParameter, target: "windows", rev: 7},
		{name: "a signed command within its age is applied", cmd: signed("p-1", t0), d: delivery{Seq: 1, StoredAt: t0.Add(time.Minute)}, want: actApply},
		{name: "a signed command older than the command age is refused", cmd: signed("p-1", t0), d: delivery{Seq: 1, StoredAt: t0.Add(time.Hour)}, want: actReject, code: domain.CodeUnauthorized},
		{name: "a signed command issued no later than one forgotten is refused", cur: forgot, cmd: signed("p-11", t0), d: delivery{Seq: 11, StoredAt: t0.Add(time.Minute)}, want: actReject, code: domain.CodeUnauthorized, rev: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := t0.Add(2 * time.Minute)
			dec := decide(tc.cur, tc.cmd, tc.d, 15*time.Minute, at)
			if dec.Action != tc.want {
				t.Fatalf("action %s (%s; %s), want %s", dec.Action, dec.Why, dec.Event.Message, tc.want)
			}
			ev := dec.Event
			if dec.Action == actSkip {
				return
			}
			if ev.CommandID != tc.cmd.ID || ev.Scope != scope || ev.CommandSeq != tc.d.Seq || ev.Code != tc.code || ev.Target != tc.target || ev.Revision != tc.rev {
				t.Errorf("event %+v, want command %s seq %d code %q target %q revision %d", ev, tc.cmd.ID, tc.d.Seq, tc.code, tc.target, tc.rev)
			}
			switch dec.Action {
			case actApply:
				m := dec.Meta
				if m.LastCommandID != tc.cmd.ID || m.LastCommandSeq != tc.d.Seq || !m.LastCommandAt.Equal(tc.d.StoredAt) || m.Prev != tc.cur.Rev || !m.Seen(tc.cmd.ID) || !m.At.Equal(at) {
					t.Errorf("meta %+v does not name the command, its revision before and its time", m)
				}
				if dec.Delete != tc.isDelete || (dec.Value == nil) != tc.isDelete {
					t.Errorf("delete %t, value %s; want delete %t", dec.Delete, dec.Value, tc.isDelete)
				}
				if !tc.isDelete && !strings.Contains(string(dec.Value), `"scope":"`+scope+`"`) {
					t.Errorf("value %s: the document with its scope", dec.Value)
				}
				if tc.cmd.SignerKey != "" && len(m.SignedIDs) != 1 {
					t.Errorf("signed ids %v: the signed command is remembered", m.SignedIDs)
				}
			case actRepublish:
				if !ev.At.Equal(tc.cur.Meta.At) || ev.Outcome != domain.OutcomeApplied {
					t.Errorf("republished %+v: the applied outcome at %s, as first published", ev, tc.cur.Meta.At)
				}
			}
		})
	}
}

// TestDecide_SameInputsSameDecision: a redelivery, or another replica, decides alike whatever
// its clock: at stamps only the outcomes that carry no state.
func TestDecide_SameInputsSameDecision(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	const scope = "/subscriptions/s1"
	c, rej := policy.DecodeCommand([]byte(`{"id": "p-1", "scope": "`+scope+`", "policy": {"blackouts": [{"start": "2026-12-20", "end": "2027-01-04"}]}}`), domain.MustKey(scope), "")
	if rej != nil {
		t.Fatal(rej)
	}
	d := delivery{Seq: 1, StoredAt: t0}
	a := decide(current{}, c, d, time.Minute, t0.Add(time.Second))
	b := decide(current{}, c, d, time.Minute, t0.Add(time.Hour))
	if a.Action != b.Action || string(a.Value) != string(b.Value) || a.Meta.LastCommandSeq != b.Meta.LastCommandSeq {
		t.Errorf("two deliveries decided %v and %v", a, b)
	}
}
