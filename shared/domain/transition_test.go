package domain_test

import (
	"reflect"
	"testing"
	"time"

	"maintsignals/shared/domain"
)

// The transition table of the README (States and tasks), copied by hand: do not derive it from the implementation.
// Columns: Pending, None, CustomerActionNeeded, update task, UpdateSucceeded, UpdateFailed,
// Forget. "refused" is a RequestNotAllowed rejection; "kept" keeps the current state;
// forgotten: the entity leaves the signal (the record becomes a tombstone in None).
const refused = "refused"

type specCell struct {
	to        string // a state name, "kept" or refused
	updating  bool
	forgotten bool
}

var specWhileUpdating = [7]specCell{
	{refused, false, false},
	{refused, false, false},
	{refused, false, false},
	{refused, false, false},
	{"None", false, false},
	{"kept", false, false},
	{refused, false, false},
}

var forgotten = specCell{"None", false, true}

var specIdle = map[string][7]specCell{
	"None":                 {{"Pending", false, false}, {"None", false, false}, {"CustomerActionNeeded", false, false}, {"Unplanned", true, false}, {refused, false, false}, {refused, false, false}, forgotten},
	"Pending":              {{"Pending", false, false}, {"None", false, false}, {"CustomerActionNeeded", false, false}, {"Planned", true, false}, {refused, false, false}, {refused, false, false}, forgotten},
	"Planned":              {{"Pending", false, false}, {"None", false, false}, {"CustomerActionNeeded", false, false}, {"Planned", true, false}, {refused, false, false}, {refused, false, false}, forgotten},
	"Unplanned":            {{"Pending", false, false}, {"None", false, false}, {"CustomerActionNeeded", false, false}, {"Unplanned", true, false}, {refused, false, false}, {refused, false, false}, forgotten},
	"CustomerActionNeeded": {{"Pending", false, false}, {"None", false, false}, {"CustomerActionNeeded", false, false}, {"Unplanned", true, false}, {refused, false, false}, {refused, false, false}, forgotten},
}

// specColumn maps each task of the README (States and tasks) to its column, by name.
var specColumn = map[string]int{
	"Pending":              0,
	"None":                 1,
	"CustomerActionNeeded": 2,
	"Everything":           3,
	"OperatorUpdate":       3,
	"CertificatesRenewal":  3,
	"SyncClusterObject":    3,
	"MigrateLoadBalancer":  3,
	"UpdateSucceeded":      4,
	"UpdateFailed":         5,
	"Forget":               6,
}

var specStates = []string{"None", "Pending", "Planned", "Unplanned", "CustomerActionNeeded"}

var (
	t0  = time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)
	now = time.Date(2025, 3, 2, 9, 30, 0, 0, time.UTC)
)

func TestTasksAndStates_MatchSpecExactly(t *testing.T) {
	var tasks []string
	for _, tk := range domain.Tasks {
		tasks = append(tasks, string(tk))
		if _, ok := specColumn[string(tk)]; !ok {
			t.Errorf("task %q is not in the README (States and tasks)", tk)
		}
	}
	if len(tasks) != len(specColumn) {
		t.Errorf("Tasks = %v, the README (States and tasks) has %d tasks", tasks, len(specColumn))
	}
	var states []string
	for _, s := range domain.States {
		states = append(states, string(s))
	}
	if !reflect.DeepEqual(states, specStates) {
		t.Errorf("States = %v, want %v", states, specStates)
	}
	var updates []string
	for _, tk := range domain.UpdateTasks {
		updates = append(updates, string(tk))
	}
	if want := []string{"Everything", "OperatorUpdate", "CertificatesRenewal", "SyncClusterObject", "MigrateLoadBalancer"}; !reflect.DeepEqual(updates, want) {
		t.Errorf("UpdateTasks = %v, want %v", updates, want)
	}
}

func baseRecord(state domain.State, updating bool) domain.Record {
	r := domain.Record{
		ResourceID:       aroID,
		State:            state,
		Updating:         updating,
		LastError:        "previous failure",
		Window:           &domain.Window{Start: t0, End: t0.Add(2 * time.Hour)},
		Reason:           "old reason",
		StateSince:       t0,
		UpdatedAt:        t0,
		LastCommandID:    "prev-cmd",
		LastCommandSeq:   41,
		Version:          domain.RecordVersion,
		RecentCommandIDs: []string{"older-cmd", "prev-cmd"},
	}
	if updating {
		r.Task = domain.TaskOperatorUpdate
	}
	return r
}

func commandFor(task domain.Task, force bool) domain.Command {
	c := domain.Command{
		ID:         "cmd-42",
		ResourceID: aroID,
		Task:       task,
		Actor:      "sre@example.com",
		Force:      force,
	}
	switch task {
	case domain.TaskUpdateFailed:
		c.Error = "operator update timed out"
	case domain.TaskPending:
		c.Window = &domain.Window{Start: now.Add(24 * time.Hour), End: now.Add(26 * time.Hour)}
		c.Reason = "planned upgrade"
	}
	return c
}

// TestApply_EveryCellOfTheSpecTable walks every state × updating × task × force.
func TestApply_EveryCellOfTheSpecTable(t *testing.T) {
	for _, stateName := range specStates {
		state := domain.State(stateName)
		for _, updating := range []bool{false, true} {
			for _, task := range domain.Tasks {
				for _, force := range []bool{false, true} {
					name := stateName + "/updating=" + boolStr(updating) + "/" + string(task) + "/force=" + boolStr(force)
					t.Run(name, func(t *testing.T) {
						checkCell(t, state, updating, task, force)
					})
				}
			}
		}
	}
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func checkCell(t *testing.T, state domain.State, updating bool, task domain.Task, force bool) {
	t.Helper()
	col, ok := specColumn[string(task)]
	if !ok {
		t.Fatalf("task %q not in SPEC", task)
	}
	outcome := col == 4 || col == 5
	// SPEC: force applies a signal/update task as if no update were in progress; an outcome
	// needs an update in progress, so force does not change its lookup.
	usesUpdatingRow := updating && !(force && !outcome)
	var want specCell
	if usesUpdatingRow {
		want = specWhileUpdating[col]
	} else {
		want = specIdle[string(state)][col]
	}

	in := baseRecord(state, updating)
	inCopy := baseRecord(state, updating)
	cmd := commandFor(task, force)
	got, tr, rej := domain.Apply(in, cmd, now)

	if want.to == refused {
		if rej == nil {
			t.Fatalf("want refusal, got record %+v", got)
		}
		if rej.Code != domain.CodeRequestNotAllowed {
			t.Errorf("code = %s, want RequestNotAllowed", rej.Code)
		}
		if rej.Message == "" {
			t.Errorf("refusal without a message")
		}
		if !reflect.DeepEqual(got, inCopy) {
			t.Errorf("refusal changed the record:\n got %+v\nwant %+v", got, inCopy)
		}
		if tr.From != state || tr.To != state || tr.Forced {
			t.Errorf("transition = %+v, want from=to=%s, not forced", tr, state)
		}
		return
	}
	if rej != nil {
		t.Fatalf("unexpected rejection %v", rej)
	}
	if !reflect.DeepEqual(in, inCopy) {
		t.Errorf("Apply mutated its input record")
	}

	wantState := state
	if want.to != "kept" {
		wantState = domain.State(want.to)
	}
	if got.State != wantState {
		t.Errorf("state = %s, want %s", got.State, wantState)
	}
	if got.Updating != want.updating {
		t.Errorf("updating = %t, want %t", got.Updating, want.updating)
	}
	if got.Forgotten() != want.forgotten || want.forgotten && !got.ForgottenAt.Equal(now) {
		t.Errorf("forgottenAt = %v, want forgotten=%t at %v", got.ForgottenAt, want.forgotten, now)
	}
	wantTask := domain.Task("")
	if want.updating {
		wantTask = task
	}
	if got.Task != wantTask {
		t.Errorf("task = %q, want %q", got.Task, wantTask)
	}
	var wantErr string
	switch {
	case col == 3 || task == domain.TaskUpdateSucceeded || want.forgotten:
		wantErr = ""
	case task == domain.TaskUpdateFailed:
		wantErr = cmd.Error
	default:
		wantErr = in.LastError
	}
	if got.LastError != wantErr {
		t.Errorf("lastError = %q, want %q", got.LastError, wantErr)
	}
	if tr.From != state || tr.To != wantState {
		t.Errorf("transition = %s -> %s, want %s -> %s", tr.From, tr.To, state, wantState)
	}
	wantForced := updating && force && !outcome
	if tr.Forced != wantForced {
		t.Errorf("forced = %t, want %t", tr.Forced, wantForced)
	}
	if wantState != state {
		if !got.StateSince.Equal(now) {
			t.Errorf("stateSince = %v, want %v (state changed)", got.StateSince, now)
		}
	} else if !got.StateSince.Equal(t0) {
		t.Errorf("stateSince = %v, want %v (state unchanged)", got.StateSince, t0)
	}
	if !got.UpdatedAt.Equal(now) {
		t.Errorf("updatedAt = %v, want %v", got.UpdatedAt, now)
	}
	if got.Version != domain.RecordVersion {
		t.Errorf("version = %d, want %d", got.Version, domain.RecordVersion)
	}
	if task == domain.TaskPending {
		if !reflect.DeepEqual(got.Window, cmd.Window) || got.Reason != cmd.Reason {
			t.Errorf("Pending: window/reason = %+v/%q, want %+v/%q", got.Window, got.Reason, cmd.Window, cmd.Reason)
		}
	}
	if got.State == domain.StateNone && got.Window != nil {
		t.Errorf("state None keeps window %+v", got.Window)
	}
	// Fields owned by the command handler are not touched.
	if got.ResourceID != in.ResourceID || got.LastCommandID != in.LastCommandID ||
		got.LastCommandSeq != in.LastCommandSeq || !reflect.DeepEqual(got.RecentCommandIDs, in.RecentCommandIDs) {
		t.Errorf("Apply touched handler-owned fields: %+v", got)
	}
}

func TestApply_ForceWhenNotUpdatingChangesNothing(t *testing.T) {
	for _, s := range domain.States {
		for _, task := range domain.Tasks {
			in := baseRecord(s, false)
			r1, tr1, rej1 := domain.Apply(in, commandFor(task, false), now)
			r2, tr2, rej2 := domain.Apply(in, commandFor(task, true), now)
			if (rej1 == nil) != (rej2 == nil) {
				t.Errorf("%s/%s: force changed acceptance: %v vs %v", s, task, rej1, rej2)
				continue
			}
			if rej1 != nil {
				if rej1.Code != rej2.Code {
					t.Errorf("%s/%s: codes %s vs %s", s, task, rej1.Code, rej2.Code)
				}
				continue
			}
			if !reflect.DeepEqual(r1, r2) {
				t.Errorf("%s/%s: force changed the result:\n%+v\n%+v", s, task, r1, r2)
			}
			if tr2.Forced || tr1 != (domain.Transition{From: tr2.From, To: tr2.To}) {
				t.Errorf("%s/%s: transitions %+v vs %+v", s, task, tr1, tr2)
			}
		}
	}
}

func TestApply_ForceEndsAnAbandonedUpdate(t *testing.T) {
	tests := []struct {
		name      string
		state     domain.State
		task      domain.Task
		wantState domain.State
		wantUpd   bool
		wantTask  domain.Task
		wantErr   string
	}{
		{"forced None clears an Unplanned update", domain.StateUnplanned, domain.TaskNone, domain.StateNone, false, "", "previous failure"},
		{"forced Pending while Planned update", domain.StatePlanned, domain.TaskPending, domain.StatePending, false, "", "previous failure"},
		{"forced CustomerActionNeeded", domain.StateUnplanned, domain.TaskCustomerActionNeeded, domain.StateCustomerActionNeeded, false, "", "previous failure"},
		{"forced new update from Planned stays Planned", domain.StatePlanned, domain.TaskEverything, domain.StatePlanned, true, domain.TaskEverything, ""},
		{"forced new update from Unplanned stays Unplanned", domain.StateUnplanned, domain.TaskCertificatesRenewal, domain.StateUnplanned, true, domain.TaskCertificatesRenewal, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := baseRecord(tt.state, true)
			_, _, rej := domain.Apply(in, commandFor(tt.task, false), now)
			if rej == nil || rej.Code != domain.CodeRequestNotAllowed {
				t.Fatalf("unforced: want RequestNotAllowed, got %v", rej)
			}
			got, tr, rej := domain.Apply(in, commandFor(tt.task, true), now)
			if rej != nil {
				t.Fatalf("forced: %v", rej)
			}
			if got.State != tt.wantState || got.Updating != tt.wantUpd || got.Task != tt.wantTask || got.LastError != tt.wantErr {
				t.Errorf("got state=%s updating=%t task=%q lastError=%q, want %s %t %q %q",
					got.State, got.Updating, got.Task, got.LastError, tt.wantState, tt.wantUpd, tt.wantTask, tt.wantErr)
			}
			if !tr.Forced {
				t.Errorf("Transition.Forced = false")
			}
		})
	}
}

func TestApply_ForcedOutcomeBehavesLikeOutcome(t *testing.T) {
	for _, task := range []domain.Task{domain.TaskUpdateSucceeded, domain.TaskUpdateFailed} {
		for _, updating := range []bool{false, true} {
			in := baseRecord(domain.StatePlanned, updating)
			r1, tr1, rej1 := domain.Apply(in, commandFor(task, false), now)
			r2, tr2, rej2 := domain.Apply(in, commandFor(task, true), now)
			if !reflect.DeepEqual(r1, r2) || tr1 != tr2 || !reflect.DeepEqual(rej1, rej2) {
				t.Errorf("%s updating=%t: forced %+v %+v %v, unforced %+v %+v %v", task, updating, r2, tr2, rej2, r1, tr1, rej1)
			}
			if tr2.Forced {
				t.Errorf("%s updating=%t: an outcome is never Forced", task, updating)
			}
		}
	}
}

func TestApply_UpdateLifecycle(t *testing.T) {
	r := domain.Record{}
	step := func(task domain.Task, wantState domain.State, wantUpd bool, wantErr string) {
		t.Helper()
		var rej *domain.Rejection
		r, _, rej = domain.Apply(r, commandFor(task, false), now)
		if rej != nil {
			t.Fatalf("%s: %v", task, rej)
		}
		if r.State != wantState || r.Updating != wantUpd || r.LastError != wantErr {
			t.Fatalf("after %s: state=%s updating=%t lastError=%q, want %s %t %q", task, r.State, r.Updating, r.LastError, wantState, wantUpd, wantErr)
		}
	}
	step(domain.TaskPending, domain.StatePending, false, "")
	step(domain.TaskOperatorUpdate, domain.StatePlanned, true, "")
	step(domain.TaskUpdateFailed, domain.StatePlanned, false, "operator update timed out")
	// A failed update leaves Planned standing; a retry stays planned and clears lastError.
	step(domain.TaskEverything, domain.StatePlanned, true, "")
	step(domain.TaskUpdateSucceeded, domain.StateNone, false, "")
	step(domain.TaskSyncClusterObject, domain.StateUnplanned, true, "")
	step(domain.TaskUpdateFailed, domain.StateUnplanned, false, "operator update timed out")
	step(domain.TaskCustomerActionNeeded, domain.StateCustomerActionNeeded, false, "operator update timed out")
	step(domain.TaskNone, domain.StateNone, false, "operator update timed out")
}

func TestApply_PendingReplacesWindowAndReason(t *testing.T) {
	in := baseRecord(domain.StatePending, false)
	c := commandFor(domain.TaskPending, false)
	got, _, rej := domain.Apply(in, c, now)
	if rej != nil {
		t.Fatal(rej)
	}
	if !reflect.DeepEqual(got.Window, c.Window) || got.Reason != "planned upgrade" {
		t.Errorf("window/reason = %+v/%q", got.Window, got.Reason)
	}
	if !got.StateSince.Equal(t0) {
		t.Errorf("Pending -> Pending moved stateSince to %v", got.StateSince)
	}
	// A new announcement without window or reason replaces both with nothing.
	c.Window, c.Reason = nil, ""
	got, _, rej = domain.Apply(got, c, now)
	if rej != nil {
		t.Fatal(rej)
	}
	if got.Window != nil || got.Reason != "" {
		t.Errorf("window/reason not replaced: %+v/%q", got.Window, got.Reason)
	}
}

func TestApply_NoneClearsWindow(t *testing.T) {
	for _, s := range domain.States {
		in := baseRecord(s, false)
		got, _, rej := domain.Apply(in, commandFor(domain.TaskNone, false), now)
		if rej != nil {
			t.Fatalf("%s: %v", s, rej)
		}
		if got.Window != nil {
			t.Errorf("%s -> None kept window %+v", s, got.Window)
		}
	}
	in := baseRecord(domain.StatePlanned, true)
	got, _, rej := domain.Apply(in, commandFor(domain.TaskUpdateSucceeded, false), now)
	if rej != nil {
		t.Fatal(rej)
	}
	if got.Window != nil {
		t.Errorf("UpdateSucceeded -> None kept window %+v", got.Window)
	}
}

func TestApply_FirstCommandOnZeroRecord(t *testing.T) {
	displayID := "/subscriptions/ABC/resourceGroups/RG/providers/Microsoft.RedHatOpenShift/openShiftClusters/Cluster1"
	tests := []struct {
		task      domain.Task
		wantState domain.State
		wantUpd   bool
		refused   bool
	}{
		{domain.TaskPending, domain.StatePending, false, false},
		{domain.TaskNone, domain.StateNone, false, false},
		{domain.TaskCustomerActionNeeded, domain.StateCustomerActionNeeded, false, false},
		{domain.TaskEverything, domain.StateUnplanned, true, false},
		{domain.TaskMigrateLoadBalancer, domain.StateUnplanned, true, false},
		{domain.TaskUpdateSucceeded, domain.StateNone, false, true},
		{domain.TaskUpdateFailed, domain.StateNone, false, true},
	}
	for _, tt := range tests {
		t.Run(string(tt.task), func(t *testing.T) {
			c := commandFor(tt.task, false)
			c.ResourceID = displayID
			got, tr, rej := domain.Apply(domain.Record{}, c, now)
			if tr.From != domain.StateNone {
				t.Errorf("from = %q, want None (an entity never seen is None)", tr.From)
			}
			if tt.refused {
				if rej == nil || rej.Code != domain.CodeRequestNotAllowed {
					t.Fatalf("want RequestNotAllowed, got %v", rej)
				}
				if got.ResourceID != "" || got.Updating || !got.UpdatedAt.IsZero() {
					t.Errorf("refusal changed the record: %+v", got)
				}
				return
			}
			if rej != nil {
				t.Fatal(rej)
			}
			if got.ResourceID != displayID {
				t.Errorf("resourceId = %q, want %q", got.ResourceID, displayID)
			}
			if got.State != tt.wantState || got.Updating != tt.wantUpd {
				t.Errorf("state=%s updating=%t, want %s %t", got.State, got.Updating, tt.wantState, tt.wantUpd)
			}
			if !got.StateSince.Equal(now) || !got.UpdatedAt.Equal(now) {
				t.Errorf("stateSince=%v updatedAt=%v, want both %v", got.StateSince, got.UpdatedAt, now)
			}
			if got.Version != domain.RecordVersion {
				t.Errorf("version = %d", got.Version)
			}
		})
	}
}

func TestApply_KeepsFirstCasingOfResourceID(t *testing.T) {
	in := baseRecord(domain.StateNone, false)
	c := commandFor(domain.TaskPending, false)
	c.ResourceID = "/SUBSCRIPTIONS/0B1F6471-1BF0-4DDA-AEC3-CB9272F09590/RESOURCEGROUPS/RG-1/PROVIDERS/MICROSOFT.REDHATOPENSHIFT/OPENSHIFTCLUSTERS/C1"
	got, _, rej := domain.Apply(in, c, now)
	if rej != nil {
		t.Fatal(rej)
	}
	if got.ResourceID != aroID {
		t.Errorf("resourceId = %q, want first casing %q", got.ResourceID, aroID)
	}
}

func TestApply_SetsVersionOnOldRecords(t *testing.T) {
	in := baseRecord(domain.StateNone, false)
	in.Version = 0
	got, _, rej := domain.Apply(in, commandFor(domain.TaskNone, false), now)
	if rej != nil {
		t.Fatal(rej)
	}
	if got.Version != domain.RecordVersion {
		t.Errorf("version = %d, want %d", got.Version, domain.RecordVersion)
	}
}

func TestApply_UnknownTaskIsInvalidParameter(t *testing.T) {
	in := baseRecord(domain.StatePlanned, false)
	for _, task := range []domain.Task{"", "pending", "everything", "Bogus"} {
		got, tr, rej := domain.Apply(in, commandFor(task, false), now)
		if rej == nil || rej.Code != domain.CodeInvalidParameter || rej.Target != "task" {
			t.Errorf("task %q: rejection %v, want InvalidParameter on task", task, rej)
		}
		if !reflect.DeepEqual(got, in) || tr.From != in.State || tr.To != in.State {
			t.Errorf("task %q changed the record or transition: %+v %+v", task, got, tr)
		}
	}
}

func TestApply_IsPure(t *testing.T) {
	in := baseRecord(domain.StatePending, false)
	c := commandFor(domain.TaskEverything, false)
	r1, tr1, _ := domain.Apply(in, c, now)
	r2, tr2, _ := domain.Apply(in, c, now)
	if !reflect.DeepEqual(r1, r2) || tr1 != tr2 {
		t.Errorf("same input, different results")
	}
}

func TestDescribe_MatchesSpecTable(t *testing.T) {
	for _, stateName := range specStates {
		for _, updating := range []bool{false, true} {
			for _, task := range domain.Tasks {
				col := specColumn[string(task)]
				cell := specIdle[stateName][col]
				if updating {
					cell = specWhileUpdating[col]
				}
				want := refused
				if cell.to != refused {
					to := cell.to
					if to == "kept" {
						to = stateName
					}
					want = to + " updating=" + boolStr(cell.updating)
				}
				if got := domain.Describe(domain.State(stateName), updating, task); got != want {
					t.Errorf("Describe(%s, %t, %s) = %q, want %q", stateName, updating, task, got, want)
				}
			}
		}
	}
}

func TestApply_ForgetLeavesATombstoneThatTheNextCommandStartsAfresh(t *testing.T) {
	in := baseRecord(domain.StateUnplanned, false)
	in.Campaign = &domain.CampaignRef{ID: "c1", Generation: 1}
	gone, tr, rej := domain.Apply(in, commandFor(domain.TaskForget, false), now)
	if rej != nil {
		t.Fatal(rej)
	}
	if !gone.Forgotten() || gone.State != domain.StateNone || gone.Window != nil || gone.Campaign != nil || gone.LastError != "" {
		t.Errorf("after Forget: %+v", gone)
	}
	if tr.From != domain.StateUnplanned || tr.To != domain.StateNone {
		t.Errorf("Forget transition %s -> %s", tr.From, tr.To)
	}
	// What the command handler keeps to recognise old commands stays on the tombstone.
	if gone.LastCommandSeq != in.LastCommandSeq || !reflect.DeepEqual(gone.RecentCommandIDs, in.RecentCommandIDs) {
		t.Errorf("Forget dropped the handler's memory: %+v", gone)
	}

	// Forgetting again keeps it forgotten.
	again, _, rej := domain.Apply(gone, commandFor(domain.TaskForget, false), now.Add(time.Hour))
	if rej != nil || !again.Forgotten() {
		t.Errorf("Forget of a forgotten entity: %+v, %v", again, rej)
	}

	// A later command tracks it again as if it were new: from None, under its own casing,
	// since now, with nothing of before but the handler's memory.
	later := now.Add(2 * time.Hour)
	c := commandFor(domain.TaskEverything, false)
	c.ResourceID = "/SUBSCRIPTIONS/0b1f/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1"
	back, tr, rej := domain.Apply(gone, c, later)
	if rej != nil {
		t.Fatal(rej)
	}
	if back.Forgotten() || back.State != domain.StateUnplanned || !back.Updating || tr.From != domain.StateNone {
		t.Errorf("after Forget, an update: %+v (%s -> %s), want Unplanned from None", back, tr.From, tr.To)
	}
	if back.ResourceID != c.ResourceID || !back.StateSince.Equal(later) || back.Reason != "" {
		t.Errorf("not tracked as new: resourceId %q, stateSince %v, reason %q", back.ResourceID, back.StateSince, back.Reason)
	}
	if !reflect.DeepEqual(back.RecentCommandIDs, in.RecentCommandIDs) {
		t.Errorf("the handler's memory was lost: %v", back.RecentCommandIDs)
	}
	// An outcome on a forgotten entity finds no update in progress.
	if _, _, rej := domain.Apply(gone, commandFor(domain.TaskUpdateSucceeded, false), later); rej == nil || rej.Code != domain.CodeRequestNotAllowed {
		t.Errorf("UpdateSucceeded on a forgotten entity: %v, want RequestNotAllowed", rej)
	}
}

func TestApply_ForgetWhileUpdatingNeedsForce(t *testing.T) {
	in := baseRecord(domain.StatePlanned, true)
	if _, _, rej := domain.Apply(in, commandFor(domain.TaskForget, false), now); rej == nil || rej.Code != domain.CodeRequestNotAllowed || rej.Target != "task" {
		t.Fatalf("unforced Forget while updating: %v, want RequestNotAllowed on task", rej)
	}
	got, tr, rej := domain.Apply(in, commandFor(domain.TaskForget, true), now)
	if rej != nil {
		t.Fatal(rej)
	}
	if !got.Forgotten() || got.Updating || got.Task != "" || !tr.Forced {
		t.Errorf("forced Forget: %+v, forced=%t", got, tr.Forced)
	}
}
