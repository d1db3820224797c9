package campaign_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec/spectest"
	"maintsignals/shared/domain"
)

var at = spectest.UTC("2026-11-01T12:00:00Z")

func control(action campaign.Action, fields string) []byte {
	return []byte(`{"id": "cmd-1", "campaign": "pucm-2026-12", "action": "` + string(action) + `"` + fields + `}`)
}

func mustControl(t testing.TB, body []byte) campaign.Control {
	t.Helper()
	c, rej := campaign.DecodeControl(body, "pucm-2026-12", "")
	if rej != nil {
		t.Fatalf("%v\n%s", rej, body)
	}
	return c
}

func types(evs []campaign.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type.Short())
	}
	return out
}

func TestDecodeControl_FieldsOfEachAction(t *testing.T) {
	cases := []struct {
		name, body, id, msgID string
		target                string
	}{
		{"no id", `{"campaign": "pucm-2026-12", "action": "pause"}`, "pucm-2026-12", "", "id"},
		{"id and header differ", string(control(campaign.ActionPause, "")), "pucm-2026-12", "cmd-2", "id"},
		{"another campaign's subject", string(control(campaign.ActionPause, "")), "other", "", "campaign"},
		{"a bad campaign id", `{"id": "c", "campaign": "Pucm", "action": "pause"}`, "", "", "campaign"},
		{"an unknown action", string(control("stop", "")), "pucm-2026-12", "", "action"},
		{"an unknown field", string(control(campaign.ActionPause, `, "force": true`)), "pucm-2026-12", "", "force"},
		{"create without a spec", string(control(campaign.ActionCreate, "")), "pucm-2026-12", "", "spec"},
		{"create with a bad spec", string(control(campaign.ActionCreate, `, "spec": `+string(spectest.Edit(t, "spread.slot", "1s")))), "pucm-2026-12", "", "spec.spread.slot"},
		{"create with an unknown spec field", string(control(campaign.ActionCreate, `, "spec": {"id": "pucm-2026-12", "extra": 1}`)), "pucm-2026-12", "", "spec.extra"},
		{"create another campaign's spec", string(control(campaign.ActionCreate, `, "spec": `+string(spectest.Edit(t, "id", "other")))), "pucm-2026-12", "", "spec.id"},
		{"retry without a phase", string(control(campaign.ActionRetry, "")), "pucm-2026-12", "", "phase"},
		{"retry of succeeded", string(control(campaign.ActionRetry, `, "phase": "succeeded"`)), "pucm-2026-12", "", "phase"},
		{"approve without a wave", string(control(campaign.ActionApprove, "")), "pucm-2026-12", "", "wave"},
		{"withdraw with cancel", string(control(campaign.ActionCancel, `, "withdraw": true`)), "pucm-2026-12", "", "action"},
		{"a phase with pause", string(control(campaign.ActionPause, `, "phase": "failed"`)), "pucm-2026-12", "", "action"},
		{"a bad issuedAt", string(control(campaign.ActionPause, `, "issuedAt": "yesterday"`)), "pucm-2026-12", "", "issuedAt"},
	}
	for _, c := range cases {
		_, rej := campaign.DecodeControl([]byte(c.body), c.id, c.msgID)
		if rej == nil || rej.Code != domain.CodeInvalidParameter || rej.Target != c.target {
			t.Errorf("%s: %v, want InvalidParameter on %q", c.name, rej, c.target)
		}
	}
	c := mustControl(t, control(campaign.ActionCreate, `, "spec": `+spectest.Example+`, "actor": "sre@example.com", "issuedAt": "2026-11-01T12:00:00Z"`))
	if c.Compiled() == nil || c.Compiled().ID != "pucm-2026-12" || c.Actor != "sre@example.com" {
		t.Errorf("create: %+v", c)
	}
}

func TestApply_CreateIsOnceForOneSpec(t *testing.T) {
	create := mustControl(t, control(campaign.ActionCreate, `, "spec": `+spectest.Example))
	c, fx, rej := campaign.Apply(nil, create, campaign.Tally{}, at)
	if rej != nil || c.Status != campaign.StatusPlanning || c.Generation != 1 || fx.Duplicate || len(fx.Events) != 0 {
		t.Fatalf("create: %+v %+v %v", c, fx, rej)
	}
	again := mustControl(t, control(campaign.ActionCreate, `, "spec": `+string(spectest.Edit(t, "announceLead", "2w"))))
	if n, fx, rej := campaign.Apply(c, again, campaign.Tally{}, at); rej != nil || !fx.Duplicate || n != c {
		t.Errorf("the same spec again: %+v %v, want duplicate", fx, rej)
	}
	other := mustControl(t, control(campaign.ActionCreate, `, "spec": `+string(spectest.Edit(t, "announceLead", "1w"))))
	if _, _, rej := campaign.Apply(c, other, campaign.Tally{}, at); rej == nil || rej.Code != domain.CodeInvalidParameter || rej.Target != "spec" {
		t.Errorf("another spec: %v, want InvalidParameter on spec", rej)
	}
	if _, _, rej := campaign.Apply(nil, mustControl(t, control(campaign.ActionPause, "")), campaign.Tally{}, at); rej == nil || rej.Code != domain.CodeRequestNotAllowed {
		t.Errorf("pause of no campaign: %v", rej)
	}
	if _, _, rej := campaign.Apply(c, mustControl(t, control(campaign.ActionPause, "")), campaign.Tally{}, at); rej == nil || rej.Code != domain.CodeRequestNotAllowed {
		t.Errorf("pause while planning: %v", rej)
	}
	s := c.Compiled()
	tally := tallyOf(s, 0, campaign.PhasePlanned, 3)
	tally.Add(1, campaign.PhasePlanned)
	tally.Add(1, campaign.PhaseSkipped)
	active, fx := campaign.Activate(c, tally, at)
	// The skipped entity is done from the start: a fifth of the selection, two tenths.
	if active.Status != campaign.StatusActive || active.Entities != 5 || !slices.Equal(types(fx.Events), []string{"created", "progress", "progress"}) ||
		fx.Events[0].Phases.Of(campaign.PhasePlanned) != 4 || fx.Events[0].ID != "campaign.pucm-2026-12.1.created" {
		t.Errorf("activate: %+v %+v", active, fx.Events)
	}
	if active.Waves[0].Opened {
		t.Errorf("the canary wave opened without approval")
	}
	if c.Status != campaign.StatusPlanning {
		t.Errorf("Activate changed the campaign it was given")
	}
}

// TestApply_EveryActionInEveryStatus is the status machine of the contract's control.
func TestApply_EveryActionInEveryStatus(t *testing.T) {
	type want struct {
		status campaign.Status
		events string // the lifecycle events, space-separated
		gen    int
		code   domain.Code
	}
	none := want{}
	cases := []struct {
		from   campaign.Status
		with   bool // paused with withdraw
		action string
		want   want
	}{
		{campaign.StatusActive, false, "pause", want{campaign.StatusPaused, "paused", 1, ""}},
		{campaign.StatusActive, false, "pause withdraw", want{campaign.StatusPaused, "paused", 2, ""}},
		{campaign.StatusPaused, false, "pause", none},
		{campaign.StatusPaused, false, "pause withdraw", want{campaign.StatusPaused, "paused", 2, ""}},
		{campaign.StatusPaused, true, "pause withdraw", none},
		{campaign.StatusHalted, false, "pause withdraw", want{campaign.StatusPaused, "paused", 2, ""}},
		{campaign.StatusCompleted, false, "pause", want{code: domain.CodeRequestNotAllowed}},
		{campaign.StatusCancelled, false, "pause", want{code: domain.CodeRequestNotAllowed}},
		{campaign.StatusPaused, true, "resume", want{campaign.StatusActive, "resumed", 1, ""}},
		{campaign.StatusHalted, false, "resume", want{campaign.StatusActive, "resumed", 1, ""}},
		{campaign.StatusActive, false, "resume", none},
		{campaign.StatusCompleted, false, "resume", want{code: domain.CodeRequestNotAllowed}},
		{campaign.StatusCancelled, false, "resume", want{code: domain.CodeRequestNotAllowed}},
		{campaign.StatusActive, false, "cancel", want{campaign.StatusCancelled, "cancelled", 1, ""}},
		{campaign.StatusPaused, true, "cancel", want{campaign.StatusCancelled, "cancelled", 1, ""}},
		{campaign.StatusHalted, false, "cancel", want{campaign.StatusCancelled, "cancelled", 1, ""}},
		{campaign.StatusCancelled, false, "cancel", none},
		{campaign.StatusCompleted, false, "cancel", want{code: domain.CodeRequestNotAllowed}},
		{campaign.StatusActive, false, "retry failed", want{campaign.StatusActive, "retried", 2, ""}},
		{campaign.StatusHalted, false, "retry failed", want{campaign.StatusHalted, "retried", 2, ""}},
		{campaign.StatusCompleted, false, "retry failed", want{campaign.StatusActive, "retried", 2, ""}},
		{campaign.StatusActive, false, "retry rejected", none}, // none is rejected
		{campaign.StatusCancelled, false, "retry failed", want{code: domain.CodeRequestNotAllowed}},
		{campaign.StatusActive, false, "approve canary", want{campaign.StatusActive, "approved", 1, ""}},
		{campaign.StatusActive, false, "approve rest", none}, // no gate
		{campaign.StatusActive, false, "approve nope", want{code: domain.CodeInvalidParameter}},
	}
	for _, c := range cases {
		camp := live(t, c.from)
		camp.Waves[0].Approved, camp.Withdraw = false, c.with
		tally := tallyOf(camp.Compiled(), 1, campaign.PhaseInProgress, 99)
		tally.Add(1, campaign.PhaseFailed) // 1%: under the threshold of 2%
		camp.Entities = 100
		verb, arg, _ := strings.Cut(c.action, " ")
		fields := map[string]string{"pause": `, "withdraw": true`, "retry": `, "phase": "` + arg + `"`, "approve": `, "wave": "` + arg + `"`}
		body := control(campaign.Action(verb), "")
		if arg != "" {
			body = control(campaign.Action(verb), fields[verb])
		}
		before, _ := camp.Encode()
		n, fx, rej := campaign.Apply(camp, mustControl(t, body), tally, at)
		after, _ := camp.Encode()
		if string(before) != string(after) {
			t.Errorf("%s %s: Apply changed the campaign it was given", c.from, c.action)
		}
		switch {
		case c.want.code != "":
			if rej == nil || rej.Code != c.want.code {
				t.Errorf("%s %s: %v, want %s", c.from, c.action, rej, c.want.code)
			}
		case rej != nil:
			t.Errorf("%s %s: %v", c.from, c.action, rej)
		case c.want == none:
			if n != camp || len(fx.Events) != 0 {
				t.Errorf("%s %s: changed %+v, want no effect", c.from, c.action, fx.Events)
			}
		case n.Status != c.want.status || strings.Join(types(fx.Events), " ") != c.want.events || n.Generation != c.want.gen:
			t.Errorf("%s %s: %s %v gen %d, want %s %s gen %d", c.from, c.action, n.Status, types(fx.Events), n.Generation, c.want.status, c.want.events, c.want.gen)
		}
	}
}

func TestApply_RetryPlansThePhaseAnewInANewGeneration(t *testing.T) {
	camp := live(t, campaign.StatusCompleted)
	camp.Finished, camp.Entities, camp.Progress = true, 10, 9
	tally := tallyOf(camp.Compiled(), 1, campaign.PhaseSucceeded, 9)
	tally.Add(1, campaign.PhaseFailed)
	n, fx, rej := campaign.Apply(camp, mustControl(t, control(campaign.ActionRetry, `, "phase": "failed"`)), tally, at)
	if rej != nil || n.Generation != 2 || len(n.Retries) != 1 || n.Retries[0] != (campaign.Retry{Phase: campaign.PhaseFailed, Generation: 2}) || n.Finished {
		t.Fatalf("%+v %v", n, rej)
	}
	if n.Status != campaign.StatusActive || !slices.Equal(types(fx.Events), []string{"retried"}) || fx.Events[0].Phase != campaign.PhaseFailed || fx.Events[0].Generation != 2 {
		t.Errorf("retried: %s %+v", n.Status, fx.Events)
	}
	failed := ent(campaign.PhaseFailed, 1)
	e, _ := campaign.Step(n, campaign.Settings{}, entityKey, failed, 0, at)
	if !e.NeedsPlan() || e.Generation != 2 || e.Wave != failed.Wave {
		t.Errorf("the failed entity stepped: %+v", e)
	}
	if n = n.Swept(2); len(n.Retries) != 0 {
		t.Errorf("swept: %+v", n.Retries)
	}
}

func TestApply_ResumeAfterAHaltWaivesTheWave(t *testing.T) {
	camp := live(t, campaign.StatusActive)
	camp.Entities, camp.Progress = 100, 4
	tally := tallyOf(camp.Compiled(), 1, campaign.PhaseSucceeded, 47)
	for range 3 {
		tally.Add(1, campaign.PhaseFailed) // 3 of 100: past 2%
	}
	for range 50 {
		tally.Add(1, campaign.PhaseAnnounced)
	}
	halted, fx := campaign.Advance(camp, tally, at)
	if halted.Status != campaign.StatusHalted || !slices.Equal(types(fx.Events), []string{"halted"}) || fx.Events[0].Wave != "rest" {
		t.Fatalf("advance: %s %v", halted.Status, types(fx.Events))
	}
	resumed, fx, rej := campaign.Apply(halted, mustControl(t, control(campaign.ActionResume, "")), tally, at)
	if rej != nil || resumed.Status != campaign.StatusActive || !resumed.Waves[1].Waived || !slices.Equal(types(fx.Events), []string{"resumed"}) {
		t.Fatalf("resume: %+v %v %v", resumed, types(fx.Events), rej)
	}
	tally.Move(1, campaign.PhaseSucceeded, campaign.PhaseFailed)
	if again, fx := campaign.Advance(resumed, tally, at); again.Status != campaign.StatusActive || len(fx.Events) != 0 {
		t.Errorf("a waived wave halted again: %s %v", again.Status, types(fx.Events))
	}
}

func TestCampaign_EncodeDecodeRoundTrip(t *testing.T) {
	camp := live(t, campaign.StatusPaused)
	camp.Retries = []campaign.Retry{{Phase: campaign.PhaseSkipped, Generation: 3}}
	b, err := camp.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := campaign.DecodeCampaign(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := back.Encode()
	if string(b) != string(b2) || back.Compiled().Digest() != camp.Digest {
		t.Errorf("round trip:\n%s\n%s", b, b2)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, k := range []string{"id", "spec", "digest", "status", "generation", "waves", "entities", "progress", "events", "createdAt"} {
		if _, ok := m[k]; !ok {
			t.Errorf("the stored campaign lacks %q: %s", k, b)
		}
	}
	if _, err := campaign.DecodeCampaign([]byte(`{"id": "x", "spec": {"id": "x"}}`)); err == nil {
		t.Errorf("a stored campaign whose spec does not compile decodes")
	}
}

var _ = time.Second
