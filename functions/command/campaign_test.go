package command

import (
	"testing"
	"time"

	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/domain"
)

// TestDecide_Campaigns: the fleet campaigns' rules as rows: which window a campaign's Pending
// may replace, what a withdrawal applies to, the campaign the record keeps and the one every
// outcome event names.
func TestDecide_Campaigns(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const id = "/subscriptions/s/resourceGroups/rg/providers/p/c1"
	key := domain.MustKey(id)
	win := &domain.Window{Start: t0.Add(48 * time.Hour), End: t0.Add(52 * time.Hour)}
	moved := &domain.Window{Start: t0.Add(72 * time.Hour), End: t0.Add(76 * time.Hour)}
	ours := func(gen int) *domain.CampaignRef { return &domain.CampaignRef{ID: "pucm", Generation: gen} }
	theirs := &domain.CampaignRef{ID: "other", Generation: 1}
	rec := func(state domain.State, w *domain.Window, ref *domain.CampaignRef) domain.Record {
		return domain.Record{ResourceID: id, State: state, Window: w, Campaign: ref, LastCommandSeq: 10, LastCommandAt: t0}
	}
	announce := func(gen int, w *domain.Window) domain.Command {
		return domain.Command{ID: admission.AnnounceID("pucm", gen, key), ResourceID: id, Task: domain.TaskPending, Window: w, Campaign: "pucm"}
	}
	withdraw := domain.Command{ID: admission.WithdrawID("pucm", 1, key), ResourceID: id, Task: domain.TaskNone, IfCampaign: "pucm"}
	plain := func(cid string, task domain.Task, w *domain.Window) domain.Command {
		return domain.Command{ID: cid, ResourceID: id, Task: task, Window: w}
	}
	updating := rec(domain.StatePlanned, win, ours(1))
	updating.Updating, updating.Task = true, domain.TaskEverything
	badID := announce(1, win)
	badID.ID = "campaign.pucm.1.0000000000000000"

	for _, tc := range []struct {
		name      string
		rec       domain.Record
		cmd       domain.Command
		want      action
		target    string              // of a rejection
		recordRef *domain.CampaignRef // the next record's campaign, when applied
		eventRef  *domain.CampaignRef // the outcome event's campaign
	}{
		{"a campaign's Pending on an entity without a window applies and names the campaign", rec(domain.StateNone, nil, nil), announce(1, win), actApply, "", ours(1), ours(1)},
		{"a campaign's Pending over a Pending without a window applies", rec(domain.StatePending, nil, nil), announce(1, win), actApply, "", ours(1), ours(1)},
		{"a campaign's Pending over another announced window is refused: superseded", rec(domain.StatePending, win, nil), announce(1, win), actReject, "campaign", nil, nil},
		{"a campaign's Pending over another campaign's window is refused; the event names that campaign", rec(domain.StatePending, win, theirs), announce(1, win), actReject, "campaign", nil, theirs},
		{"a campaign's Pending of the generation the entity holds is a duplicate, even after a reschedule", rec(domain.StatePending, moved, ours(1)), announce(1, win), actDuplicate, "", nil, ours(1)},
		{"a campaign's Pending of a new generation over its own window applies", rec(domain.StatePending, win, ours(1)), announce(2, moved), actApply, "", ours(2), ours(2)},
		{"a campaign's Pending whose id is not the entity's is refused", rec(domain.StateNone, nil, nil), badID, actReject, "id", nil, nil},
		{"a withdrawal of the campaign's window applies and the record leaves the campaign", rec(domain.StatePending, win, ours(1)), withdraw, actApply, "", nil, ours(1)},
		{"a withdrawal of another's window is refused", rec(domain.StatePending, win, theirs), withdraw, actReject, "ifCampaign", nil, theirs},
		{"a withdrawal after the window went is refused", rec(domain.StateNone, nil, nil), withdraw, actReject, "ifCampaign", nil, nil},
		{"a withdrawal while the update runs is refused by the table", updating, withdraw, actReject, "task", nil, ours(1)},
		{"the updater's start keeps the campaign", rec(domain.StatePending, win, ours(1)), plain("u1", domain.TaskEverything, nil), actApply, "", ours(1), ours(1)},
		{"the update's success ends the window; its event still names the campaign", updating, plain("u2", domain.TaskUpdateSucceeded, nil), actApply, "", nil, ours(1)},
		{"an SRE's own Pending replaces the window; its event names the campaign it ended", rec(domain.StatePending, win, ours(1)), plain("s1", domain.TaskPending, moved), actApply, "", nil, ours(1)},
		{"a refused command names the record's campaign", rec(domain.StatePending, win, ours(1)), plain("s2", domain.TaskUpdateSucceeded, nil), actReject, "", nil, ours(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dec := decide(tc.rec, tc.cmd, delivery{Seq: 11, StoredAt: t0.Add(time.Second)}, settings{MaxCommandAge: time.Minute}, t0.Add(2*time.Second))
			if dec.Action != tc.want {
				t.Fatalf("action %s (%s: %s), want %s", dec.Action, dec.Why, dec.Event.Message, tc.want)
			}
			if tc.want == actReject && tc.target != "" && dec.Event.Target != tc.target {
				t.Errorf("refused on %q (%s), want %q", dec.Event.Target, dec.Event.Message, tc.target)
			}
			if !sameRef(dec.Event.Campaign, tc.eventRef) {
				t.Errorf("event names campaign %+v, want %+v", dec.Event.Campaign, tc.eventRef)
			}
			if tc.want != actApply {
				return
			}
			if !sameRef(dec.Next.Campaign, tc.recordRef) || !sameRef(dec.Next.LastEvent.Campaign, tc.eventRef) {
				t.Errorf("record's campaign %+v, its last event's %+v; want %+v and %+v", dec.Next.Campaign, dec.Next.LastEvent.Campaign, tc.recordRef, tc.eventRef)
			}
		})
	}
}

func sameRef(a, b *domain.CampaignRef) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// TestDecodeCommand_CampaignFields: campaign and ifCampaign are read, and checked.
func TestDecodeCommand_CampaignFields(t *testing.T) {
	const id = "/subscriptions/s/c1"
	key := domain.MustKey(id)
	for _, tc := range []struct {
		body, target string
	}{
		{`{"id":"a","resourceId":"` + id + `","task":"Pending","campaign":"pucm"}`, ""},
		{`{"id":"a","resourceId":"` + id + `","task":"None","ifCampaign":"pucm"}`, ""},
		{`{"id":"a","resourceId":"` + id + `","task":"None","campaign":"pucm"}`, "campaign"},
		{`{"id":"a","resourceId":"` + id + `","task":"Pending","campaign":"PUCM"}`, "campaign"},
		{`{"id":"a","resourceId":"` + id + `","task":"None","ifCampaign":"a.b"}`, "ifCampaign"},
	} {
		c, rej := domain.DecodeCommand([]byte(tc.body), key, "")
		switch {
		case tc.target == "" && (rej != nil || c.Campaign+c.IfCampaign != "pucm"):
			t.Errorf("%s: %v, %+v", tc.body, rej, c)
		case tc.target != "" && (rej == nil || rej.Target != tc.target):
			t.Errorf("%s: %v, want refused on %s", tc.body, rej, tc.target)
		}
	}
}
