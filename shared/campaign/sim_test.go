package campaign_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"maintsignals/shared/campaign"
	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/campaignspec/spectest"
	"maintsignals/shared/domain"
)

// world is the command function and the records of the messaging contract, reduced to the
// rules: validation, the notice, Admit, the transition table, exactly-once by id.
type world struct {
	t           *testing.T
	records     map[string]domain.Record
	applied     map[string]int // applied Pendings per entity and generation
	announced   map[string]time.Time
	finished    map[string]time.Time // the last update outcome of each entity
	refusedBusy int
	withdrawn   map[string]int // applied withdrawals per entity and generation
	minNotice   time.Duration
}

func newWorld(t *testing.T, minNotice time.Duration) *world {
	return &world{t: t, records: map[string]domain.Record{}, applied: map[string]int{}, minNotice: minNotice,
		announced: map[string]time.Time{}, finished: map[string]time.Time{}, withdrawn: map[string]int{}}
}

func (w *world) handle(key string, c admission.Command, at time.Time) domain.Event {
	r := w.records[key]
	if r.State == "" {
		r.State = domain.StateNone
	}
	if rej := c.Command.Validate(key, c.ID); rej != nil {
		w.t.Fatalf("the campaign sent an invalid command: %v", rej)
	}
	if r.Seen(c.ID) {
		return domain.Duplicate(c.Command, r.State, at)
	}
	reject := func(rej *domain.Rejection) domain.Event {
		if rej.Target == "task" {
			w.refusedBusy++
		}
		ev := domain.Rejected(c.Command, r.State, rej, at)
		ev.Campaign = r.Campaign
		return ev
	}
	if rej := domain.CheckNotice(c.Command, at, w.minNotice); rej != nil {
		return reject(rej)
	}
	ref, rej := admission.Admit(r, c, key)
	if rej != nil {
		return reject(rej)
	}
	next, tr, rej := domain.Apply(r, c.Command, at)
	if rej != nil {
		return reject(rej)
	}
	if c.IfCampaign != "" {
		w.withdrawn[fmt.Sprint(key, r.Campaign.Generation)]++
	}
	if c.Campaign != "" {
		next.Campaign = ref
		w.applied[fmt.Sprint(key, ref.Generation)]++
		w.announced[key] = at
	}
	if c.Task.Kind() == domain.KindOutcome {
		w.finished[key] = at
	}
	next.Remember(c.ID)
	w.records[key] = next
	ev := domain.Applied(c.Command, tr, at)
	ev.Campaign = domain.EventCampaign(r, next)
	return ev
}

// function is the campaign function reduced to its loop: step every entity, publish what
// that decides, observe the outcomes, re-plan what needs it, advance the campaign.
type function struct {
	w        *world
	c        *campaign.Campaign
	set      campaign.Settings
	entities []campaign.Keyed
	tally    campaign.Tally
	events   []campaign.Event
	crashes  int
	lost     []lostOutcome
	clear    int // the entity an SRE clears before its window, if any
}

type lostOutcome struct {
	i        int
	outcomes []domain.Event
}

func (f *function) observe(i int, ev domain.Event) {
	e := f.entities[i]
	next := campaign.Observe(f.c, f.set, e.Key, e.Entity, ev)
	f.tally.Move(e.Entity.Wave, e.Entity.Phase, next.Phase)
	f.entities[i].Entity = next
}

func (f *function) tick(now time.Time) {
	late := f.lost // outcomes of the last crash: read after this tick's decisions
	f.lost = nil
	for i, k := range f.entities {
		next, fx := campaign.Step(f.c, f.set, k.Key, k.Entity, f.set.MinNotice, now)
		var outcomes []domain.Event
		for _, cmd := range fx.Commands {
			outcomes = append(outcomes, f.w.handle(k.Key, cmd, now))
		}
		if len(fx.Commands) > 0 && f.crashes > 0 && i%7 == 0 {
			f.crashes-- // published, then down before writing: the outcome waits in the stream
			f.lost = append(f.lost, lostOutcome{i, outcomes})
			continue
		}
		f.tally.Move(k.Entity.Wave, k.Entity.Phase, next.Phase)
		f.entities[i].Entity = next
		for _, ev := range outcomes {
			f.observe(i, ev)
		}
	}
	for _, l := range late {
		for _, ev := range l.outcomes {
			f.observe(l.i, ev)
		}
	}
	for _, changed := range campaign.Replan(f.c.Compiled(), f.set, now, f.entities, nil) {
		i, _ := slices.BinarySearchFunc(f.entities, changed.Key, func(k campaign.Keyed, key string) int { return cmpString(k.Key, key) })
		f.tally.Move(f.entities[i].Entity.Wave, f.entities[i].Entity.Phase, changed.Entity.Phase)
		f.entities[i] = changed
	}
	f.advance(now)
}

func (f *function) advance(now time.Time) {
	var fx campaign.Effects
	f.c, fx = campaign.Advance(f.c, f.tally, now)
	f.events = append(f.events, fx.Events...)
}

func (f *function) control(body []byte, now time.Time) {
	var fx campaign.Effects
	var rej *domain.Rejection
	if f.c, fx, rej = campaign.Apply(f.c, mustControl(f.w.t, body), f.tally, now); rej != nil {
		f.w.t.Fatal(rej)
	}
	f.events = append(f.events, fx.Events...)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// A campaign of 300 entities in a canary (manual gate) and the rest (10%), from creation to
// completed: an updater works each window, failing 3% of them; one entity is updating when
// its announcement comes, one gets an SRE's own Pending first, one an SRE's None.
func TestSimulation_ACampaignFromCreationToCompleted(t *testing.T) {
	created := spectest.UTC("2026-12-01T00:00:00Z")
	s := spectest.MustSpec(t, spectest.Edit(t, "window.earliest", "2026-12-01T02:00:00Z", "window.deadline", "2026-12-03T00:00:00Z",
		"window.length", "1h", "spread.across", "4h", "spread.slot", "15m", "spread.maxPerSlot", 20, "spread.maxPerSlotPerSubscription", 6,
		"announceLead", "1h", "waves[1].failureThreshold", "10%"))
	var ids []string
	for i := range 300 {
		ids = append(ids, fmt.Sprintf("/subscriptions/%s/resourceGroups/rg/providers/P/c%03d", []string{"aaaa", "b1", "b2", "b3", "b4"}[i%5], i))
	}
	sel := entities(t, ids...)
	w := newWorld(t, 30*time.Minute)
	busy, preempted, cleared := sel[7].Key, sel[100].Key, sel[200].Key
	w.records[busy] = domain.Record{ResourceID: "x", State: domain.StateUnplanned, Updating: true, Task: domain.TaskEverything}
	w.records[preempted] = domain.Record{ResourceID: "x", State: domain.StatePending, Window: &domain.Window{Start: spectest.UTC("2026-12-02T10:00:00Z"), End: spectest.UTC("2026-12-02T11:00:00Z")}}

	f := start(t, w, s, sel, created)
	f.crashes, f.clear = 20, 200
	f.control(control(campaign.ActionApprove, `, "wave": "canary"`), created)

	f.run(t, created, 72*time.Hour, map[time.Duration]func(time.Time){
		3 * time.Hour: func(time.Time) {
			r := w.records[busy]
			r.Updating, r.State = false, domain.StateNone // its update ends
			w.records[busy] = r
		},
	})
	phases := f.tally.Total()
	t.Logf("status %s, phases %v, %d events", f.c.Status, phases, len(f.events))
	if f.c.Status != campaign.StatusCompleted || phases.Finished() != 300 {
		t.Fatalf("not completed: %s %+v", f.c.Status, phases)
	}
	if phases.Of(campaign.PhaseSuperseded) != 1 || phases.Of(campaign.PhaseCleared) != 1 || phases.Of(campaign.PhaseFailed) == 0 || phases.Of(campaign.PhaseSucceeded) < 280 {
		t.Errorf("phases %v", phases)
	}
	checkOnce(t, w)
	for _, k := range []string{busy, cleared} {
		if w.applied[k+"1"] != 1 {
			t.Errorf("%s: not announced once", k)
		}
	}
	checkWavesInOrder(t, w, f)
	if e := f.entities[7].Entity; e.Phase != campaign.PhaseSucceeded || w.announced[busy].Before(created.Add(3*time.Hour)) || w.refusedBusy == 0 {
		t.Errorf("the entity busy at first: %+v, announced %s, refused %d times", e, w.announced[busy], w.refusedBusy)
	}
	var kinds []string
	for _, e := range f.events {
		kinds = append(kinds, e.Type.Short())
	}
	progress := slices.DeleteFunc(slices.Clone(kinds), func(k string) bool { return k != "progress" })
	if kinds[0] != "created" || kinds[len(kinds)-1] != "completed" || len(progress) != phases.Done()*10/300 {
		t.Errorf("events %v", kinds)
	}
}

// run ticks every minute from created for at most d, calling at each offset its action
// first, and checks the burndown at every tick; it stops once the campaign is finished.
func (f *function) run(t *testing.T, created time.Time, d time.Duration, at map[time.Duration]func(time.Time)) {
	for now := created; now.Before(created.Add(d)); now = now.Add(time.Minute) {
		if act := at[now.Sub(created)]; act != nil {
			act(now)
		}
		f.tick(now)
		f.updater(now)
		if total := f.tally.Total(); total.Total() != len(f.entities) {
			t.Fatalf("%s: the burndown sums to %d, not the selection", now, total.Total())
		}
		f.advance(now)
		if f.c.Finished {
			return
		}
	}
}

// checkWavesInOrder checks that the second wave was announced only once every entity of the
// first had finished.
func checkWavesInOrder(t *testing.T, w *world, f *function) {
	t.Helper()
	var firstDone, secondFirst time.Time
	for _, k := range f.entities {
		switch {
		case k.Entity.Wave == 0 && w.finished[k.Key].After(firstDone):
			firstDone = w.finished[k.Key]
		case k.Entity.Wave == 1 && (secondFirst.IsZero() || w.announced[k.Key].Before(secondFirst)):
			secondFirst = w.announced[k.Key]
		}
	}
	if !secondFirst.After(firstDone) {
		t.Errorf("the second wave announced from %s, the first finished at %s", secondFirst, firstDone)
	}
}

// start plans the selection and activates the campaign, as the function does on create.
func start(t *testing.T, w *world, s *campaignspec.Spec, sel campaign.Selection, created time.Time) *function {
	set := campaign.Settings{MinNotice: w.minNotice}
	plan := campaign.NewPlan(s, sel, nil, set, created)
	f := &function{w: w, set: set, tally: campaign.NewTally(s), clear: -1}
	for i := range plan.Len() {
		e := plan.Entity(i)
		f.entities = append(f.entities, campaign.Keyed{Key: sel[i].Key, Entity: e})
		f.tally.Add(e.Wave, e.Phase)
	}
	var fx campaign.Effects
	f.c, fx = campaign.Activate(campaign.NewCampaign(s, created), f.tally, created)
	f.events = append(f.events, fx.Events...)
	return f
}

// updater works the windows: it starts each announced entity at its window's start, and ends
// the update half an hour later, failing one in thirty; an SRE clears one entity.
func (f *function) updater(now time.Time) {
	for i, k := range f.entities {
		e := k.Entity
		r := f.w.records[k.Key]
		if e.Window == nil || r.Campaign == nil {
			continue
		}
		send := func(task domain.Task, errText string) {
			c := admission.Command{Command: domain.Command{ID: fmt.Sprintf("u-%s-%s-%d", task, k.Key[len(k.Key)-4:], e.Generation), ResourceID: e.ResourceID, Task: task, Error: errText}}
			f.observe(i, f.w.handle(k.Key, c, now))
		}
		switch {
		case i == f.clear && r.State == domain.StatePending && now.Equal(e.Window.Start.Add(-10*time.Minute)):
			send(domain.TaskNone, "")
		case r.State == domain.StatePending && now.Equal(e.Window.Start):
			send(domain.TaskEverything, "")
		case r.Updating && now.Equal(e.Window.Start.Add(30*time.Minute)):
			if i%30 == 11 {
				send(domain.TaskUpdateFailed, "boom")
			} else {
				send(domain.TaskUpdateSucceeded, "")
			}
		}
	}
}

func checkOnce(t *testing.T, w *world) {
	t.Helper()
	for k, n := range w.applied {
		if n != 1 {
			t.Errorf("%s: %d applied Pendings of one generation", k, n)
		}
	}
	for k, n := range w.withdrawn {
		if n != 1 {
			t.Errorf("%s: withdrawn %d times in one generation", k, n)
		}
	}
}

// Paused with withdraw, resumed, then cancelled, with the function crashing between
// publishing and writing: every announced entity not started is withdrawn once per
// generation, announced again once after the resume, and the campaign completes cancelled.
func TestSimulation_PauseWithdrawResumeThenCancel(t *testing.T) {
	created := spectest.UTC("2026-12-01T00:00:00Z")
	s := spectest.MustSpec(t, spectest.Edit(t, "window.earliest", "2026-12-01T02:00:00Z", "window.deadline", "2026-12-04T00:00:00Z",
		"window.length", "1h", "spread.across", "12h", "spread.slot", "15m", "spread.maxPerSlot", 20, "spread.maxPerSlotPerSubscription", 6,
		"announceLead", "2h", "waves", spectest.Del))
	var ids []string
	for i := range 200 {
		ids = append(ids, fmt.Sprintf("/subscriptions/s%d/resourceGroups/rg/providers/P/c%03d", i%9, i))
	}
	w := newWorld(t, 30*time.Minute)
	f := start(t, w, s, entities(t, ids...), created)
	f.crashes = 40
	var pausedPhases campaign.Counts
	f.run(t, created, 96*time.Hour, map[time.Duration]func(time.Time){
		4 * time.Hour: func(now time.Time) { f.control(control(campaign.ActionPause, `, "withdraw": true`), now) },
		5 * time.Hour: func(now time.Time) {
			pausedPhases = f.tally.Total()
			f.control(control(campaign.ActionResume, ""), now)
		},
		9 * time.Hour: func(now time.Time) { f.control(control(campaign.ActionCancel, ""), now) },
	})
	phases := f.tally.Total()
	t.Logf("paused: %v; at the end %s %v", pausedPhases, f.c.Status, phases)
	if pausedPhases.Of(campaign.PhaseAnnounced) != 0 || f.crashes != 0 {
		t.Errorf("an hour into the pause: %v, want nothing announced and not started (%d crashes left)", pausedPhases, f.crashes)
	}
	if f.c.Status != campaign.StatusCancelled || !f.c.Finished || phases.Of(campaign.PhaseCancelled) == 0 || phases.Of(campaign.PhaseSucceeded) == 0 {
		t.Fatalf("%s finished %t %v", f.c.Status, f.c.Finished, phases)
	}
	if len(w.withdrawn) == 0 || f.c.Generation != 2 {
		t.Errorf("%d withdrawals, generation %d", len(w.withdrawn), f.c.Generation)
	}
	checkOnce(t, w)
	for _, k := range f.entities {
		if r := w.records[k.Key]; r.Campaign != nil && (r.State == domain.StatePending) {
			t.Errorf("%s: still Pending with the cancelled campaign's window (%s)", k.Key, k.Entity.Phase)
		}
	}
}
