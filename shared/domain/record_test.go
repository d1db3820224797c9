package domain_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"maintsignals/shared/domain"
)

func TestKeyFromSubject(t *testing.T) {
	tests := []struct{ subject, want string }{
		{"maint.cmd.3.abc", "abc"},
		{"maint.cmd.abc", "abc"},
		{"maint.evt.abc", "abc"},
		{"maint.dlq.abc", "abc"},
		{"maint.cmd.12.subscriptions/x/providers/microsoft=2eredhatopenshift", "subscriptions/x/providers/microsoft=2eredhatopenshift"},
		{"abc", "abc"},
	}
	for _, tt := range tests {
		if got := domain.KeyFromSubject(tt.subject); got != tt.want {
			t.Errorf("KeyFromSubject(%q) = %q, want %q", tt.subject, got, tt.want)
		}
	}
}

func TestSubjects_FollowSpec(t *testing.T) {
	k := domain.MustKey(aroID)
	tests := []struct{ got, want string }{
		{domain.CommandSubject(k), "maint.cmd." + k},
		// §3 with the layout of §14 and §15 (README, The records live in eight cells): the
		// cell and the tenant tokens ahead of the key, which stays the last token.
		{domain.EventSubject(k), "maint.evt." + domain.CellOf(k).String() + ".0b1f6471-1bf0-4dda-aec3-cb9272f09590.rg-1." + k},
		{domain.NoticeSubject(k), "maint.notice." + domain.CellOf(k).String() + ".0b1f6471-1bf0-4dda-aec3-cb9272f09590.rg-1." + k},
		{domain.RecordSubject(k), "$KV.maintenance-c" + domain.CellOf(k).String() + ".0b1f6471-1bf0-4dda-aec3-cb9272f09590.rg-1." + k},
		{domain.DLQSubject(k), "maint.dlq." + k},
		{domain.CommandsStream, "MAINT_COMMANDS"},
		{domain.EventsStream, "MAINT_EVENTS"},
		{domain.ScheduleStream, "MAINT_SCHEDULE"},
		{domain.DLQStream, "MAINT_DLQ"},
		{domain.Bucket, "maintenance"},
		{domain.ScheduleSubject, "maint.schedule.emit"},
		{domain.TickSubject, "maint.tick.emit"},
		{domain.HeaderMsgID, "Nats-Msg-Id"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	for _, s := range []string{domain.CommandSubject(k), domain.EventSubject(k), domain.NoticeSubject(k), domain.RecordSubject(k), domain.DLQSubject(k)} {
		if got := domain.KeyFromSubject(s); got != k {
			t.Errorf("KeyFromSubject(%q) = %q, want %q", s, got, k)
		}
	}
}

func TestRecord_RememberKeepsTheNewestIDs(t *testing.T) {
	tests := []struct {
		name string
		n    int
	}{
		{"one", 1},
		{"below the limit", domain.RecentIDs - 1},
		{"at the limit", domain.RecentIDs},
		{"one over the limit", domain.RecentIDs + 1},
		{"far over the limit", 3*domain.RecentIDs + 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r domain.Record
			for i := 0; i < tt.n; i++ {
				r.Remember(fmt.Sprintf("cmd-%d", i))
			}
			first := max(0, tt.n-domain.RecentIDs)
			var want []string
			for i := first; i < tt.n; i++ {
				want = append(want, fmt.Sprintf("cmd-%d", i))
			}
			if !reflect.DeepEqual(r.RecentCommandIDs, want) {
				t.Fatalf("RecentCommandIDs = %v, want %v (newest last)", r.RecentCommandIDs, want)
			}
			for i := 0; i < tt.n; i++ {
				id := fmt.Sprintf("cmd-%d", i)
				if got, want := r.Seen(id), i >= first; got != want {
					t.Errorf("Seen(%q) = %t, want %t", id, got, want)
				}
			}
			if r.Seen("never") {
				t.Errorf("Seen(never) = true")
			}
		})
	}
}

func fullRecord() domain.Record {
	at := time.Date(2025, 3, 2, 9, 30, 0, 0, time.UTC)
	return domain.Record{
		ResourceID:       aroID,
		State:            domain.StatePlanned,
		Updating:         true,
		Task:             domain.TaskOperatorUpdate,
		LastError:        "previous failure",
		Window:           &domain.Window{Start: at.Add(time.Hour), End: at.Add(3 * time.Hour)},
		Reason:           "quarterly upgrade",
		StateSince:       at.Add(-time.Hour),
		UpdatedAt:        at,
		LastCommandID:    "cmd-9",
		LastCommandSeq:   1234,
		Version:          domain.RecordVersion,
		RecentCommandIDs: []string{"cmd-8", "cmd-9"},
		SignedIDs:        domain.SignedIDs{{ID: "cmd-8", IssuedAt: at.Add(-time.Second)}, {ID: "cmd-9", IssuedAt: at.Add(123456789)}},
		SignedForgotten:  at.Add(-time.Hour),
		LastEvent: &domain.Event{
			CommandID: "cmd-9", ResourceID: aroID, Task: domain.TaskOperatorUpdate, Outcome: domain.OutcomeApplied,
			From: domain.StatePending, To: domain.StatePlanned, Revision: 7, At: at, Actor: "sre", CommandSeq: 1234,
		},
	}
}

func TestRecord_EncodeDecodeRoundTrip(t *testing.T) {
	for _, r := range []domain.Record{fullRecord(), {ResourceID: "/a", State: domain.StateNone}} {
		b, err := domain.EncodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := domain.DecodeRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, r)
		}
	}
}

func TestRecord_EncodesSpecFieldNames(t *testing.T) {
	b, err := domain.EncodeRecord(fullRecord())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"resourceId", "state", "updating", "task", "lastError", "window", "reason",
		"stateSince", "updatedAt", "lastCommandId", "lastCommandSeq", "version"} {
		if _, ok := m[f]; !ok {
			t.Errorf("record JSON lacks field %q: %s", f, b)
		}
	}
	var w map[string]string
	if err := json.Unmarshal(m["window"], &w); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"start", "end"} {
		if _, err := time.Parse(time.RFC3339, w[f]); err != nil {
			t.Errorf("window.%s = %q is not RFC 3339: %v", f, w[f], err)
		}
	}
	if got := string(m["signedIds"]); got != `"cmd-8@2025-03-02T09:29:59Z cmd-9@2025-03-02T09:30:00.123456789Z"` {
		t.Errorf("signedIds = %s, want the ids with their issuedAt in one string", got)
	}
	if string(m["state"]) != `"Planned"` || string(m["version"]) != "1" {
		t.Errorf("state = %s, version = %s", m["state"], m["version"])
	}
}

func TestDecodeRecord_IgnoresUnknownFields(t *testing.T) {
	b := []byte(`{"resourceId":"/Sub/A","state":"Pending","updating":false,"future":{"nested":[1,2]},"anotherNewField":"x","version":2,
		"window":{"start":"2025-04-01T02:00:00Z","end":"2025-04-01T06:00:00Z","timezone":"UTC"}}`)
	r, err := domain.DecodeRecord(b)
	if err != nil {
		t.Fatalf("DecodeRecord: %v", err)
	}
	if r.ResourceID != "/Sub/A" || r.State != domain.StatePending || r.Version != 2 || r.Window == nil {
		t.Errorf("decoded %+v", r)
	}
}

func TestDecodeRecord_MissingStateIsNone(t *testing.T) {
	r, err := domain.DecodeRecord([]byte(`{"resourceId":"/a"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.State != domain.StateNone {
		t.Errorf("state = %q, want None", r.State)
	}
}

func TestDecodeRecord_RejectsGarbage(t *testing.T) {
	for _, b := range []string{"", "not json", `{"state":`, `{"updating":"yes"}`, `{"signedIds":"cmd-1"}`, `{"signedIds":"cmd-1@yesterday"}`, `{"signedIds":"@2025-03-02T09:30:00Z"}`, `{"signedIds":["cmd-1"]}`} {
		if _, err := domain.DecodeRecord([]byte(b)); err == nil {
			t.Errorf("DecodeRecord(%q) succeeded", b)
		}
	}
}

func TestEvent_EncodeDecodeRoundTripAndFieldNames(t *testing.T) {
	e := domain.Event{
		CommandID: "cmd-1", ResourceID: aroID, Task: domain.TaskPending, Outcome: domain.OutcomeRejected,
		From: domain.StatePlanned, To: domain.StatePlanned, Code: domain.CodeRequestNotAllowed,
		Message: "not allowed", Target: "task", Revision: 9,
		At: time.Date(2025, 3, 2, 9, 30, 0, 0, time.UTC), Actor: "sre", Force: true, Reason: "r", CommandSeq: 77,
	}
	b, err := domain.EncodeEvent(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := domain.DecodeEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, e)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"commandId", "resourceId", "task", "outcome", "from", "to", "code", "message",
		"target", "revision", "at", "actor", "force"} {
		if _, ok := m[f]; !ok {
			t.Errorf("event JSON lacks field %q: %s", f, b)
		}
	}
	if _, err := domain.DecodeEvent([]byte("{")); err == nil {
		t.Error("DecodeEvent accepted truncated JSON")
	}
	if _, err := domain.DecodeEvent([]byte(`{"commandId":"x","newField":1}`)); err != nil {
		t.Errorf("DecodeEvent refused an unknown field: %v", err)
	}
}

func TestOutcomes_MatchSpec(t *testing.T) {
	got := []string{string(domain.OutcomeApplied), string(domain.OutcomeRejected), string(domain.OutcomeDuplicate), string(domain.OutcomeDeadLettered)}
	want := []string{"applied", "rejected", "duplicate", "dead_lettered"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("outcomes = %v, want %v", got, want)
	}
}

func TestRejected_KeepsStateAndCopiesCommand(t *testing.T) {
	c := domain.Command{ID: "cmd-1", ResourceID: aroID, Task: domain.TaskUpdateSucceeded, Actor: "sre", Force: true, Reason: "r"}
	rej := &domain.Rejection{Code: domain.CodeRequestNotAllowed, Target: "task", Message: "no update"}
	at := time.Date(2025, 3, 2, 9, 30, 0, 0, time.UTC)
	e := domain.Rejected(c, domain.StateUnplanned, rej, at)
	want := domain.Event{
		CommandID: "cmd-1", ResourceID: aroID, Task: domain.TaskUpdateSucceeded, Outcome: domain.OutcomeRejected,
		From: domain.StateUnplanned, To: domain.StateUnplanned, Code: domain.CodeRequestNotAllowed,
		Message: "no update", Target: "task", At: at, Actor: "sre", Force: true, Reason: "r",
	}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("Rejected = %+v, want %+v", e, want)
	}
}

func TestParseStateLoose(t *testing.T) {
	tests := []struct {
		in     string
		want   domain.State
		wantOK bool
	}{
		{"None", domain.StateNone, true},
		{"none", domain.StateNone, true},
		{"NONE", domain.StateNone, true},
		{"Pending", domain.StatePending, true},
		{"pending", domain.StatePending, true},
		{"Planned", domain.StatePlanned, true},
		{"PLANNED", domain.StatePlanned, true},
		{"Unplanned", domain.StateUnplanned, true},
		{"unplanned", domain.StateUnplanned, true},
		{"CustomerActionNeeded", domain.StateCustomerActionNeeded, true},
		{"customeractionneeded", domain.StateCustomerActionNeeded, true},
		{"customerActionNeeded", domain.StateCustomerActionNeeded, true},
		{"customer_action_needed", domain.StateCustomerActionNeeded, true},
		{"CUSTOMER_ACTION_NEEDED", domain.StateCustomerActionNeeded, true},
		{"", "", false},
		{"bogus", "", false},
		{"plan", "", false},
		{" None", "", false},
		{"customer-action-needed", "", false},
		{"Everything", "", false},
	}
	for _, tt := range tests {
		got, ok := domain.ParseStateLoose(tt.in)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseStateLoose(%q) = %q, %t; want %q, %t", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestState_ValidAndMetricValues(t *testing.T) {
	tests := []struct {
		s            domain.State
		metric, pucm string
	}{
		{domain.StateNone, "none", "none"},
		{domain.StatePending, "pending", "pending"},
		{domain.StatePlanned, "planned", "planned"},
		{domain.StateUnplanned, "unplanned", "unplanned"},
		{domain.StateCustomerActionNeeded, "customer_action_needed", "customerActionNeeded"},
	}
	for _, tt := range tests {
		if !tt.s.Valid() {
			t.Errorf("%q.Valid() = false", tt.s)
		}
		if got := tt.s.MetricValue(); got != tt.metric {
			t.Errorf("%q.MetricValue() = %q, want %q", tt.s, got, tt.metric)
		}
		if got := tt.s.PUCMValue(); got != tt.pucm {
			t.Errorf("%q.PUCMValue() = %q, want %q", tt.s, got, tt.pucm)
		}
	}
	for _, s := range []domain.State{"", "none", "NONE", "customer_action_needed", "Updating"} {
		if s.Valid() {
			t.Errorf("%q.Valid() = true: states are matched exactly", s)
		}
	}
}

func TestTask_KindAndValid(t *testing.T) {
	tests := []struct {
		task domain.Task
		kind domain.TaskKind
	}{
		{domain.TaskPending, domain.KindSignal},
		{domain.TaskNone, domain.KindSignal},
		{domain.TaskCustomerActionNeeded, domain.KindSignal},
		{domain.TaskEverything, domain.KindUpdate},
		{domain.TaskOperatorUpdate, domain.KindUpdate},
		{domain.TaskCertificatesRenewal, domain.KindUpdate},
		{domain.TaskSyncClusterObject, domain.KindUpdate},
		{domain.TaskMigrateLoadBalancer, domain.KindUpdate},
		{domain.TaskUpdateSucceeded, domain.KindOutcome},
		{domain.TaskUpdateFailed, domain.KindOutcome},
		{domain.TaskForget, domain.KindAdmin},
		{"forget", domain.KindUnknown},
		{"", domain.KindUnknown},
		{"pending", domain.KindUnknown},
		{"everything", domain.KindUnknown},
		{"Planned", domain.KindUnknown},
		{"Unplanned", domain.KindUnknown},
	}
	var names []string
	for _, tt := range tests {
		if got := tt.task.Kind(); got != tt.kind {
			t.Errorf("%q.Kind() = %d, want %d", tt.task, got, tt.kind)
		}
		if got := tt.task.Valid(); got != (tt.kind != domain.KindUnknown) {
			t.Errorf("%q.Valid() = %t", tt.task, got)
		}
		if tt.kind != domain.KindUnknown {
			names = append(names, string(tt.task))
		}
	}
	var all []string
	for _, tk := range domain.Tasks {
		all = append(all, string(tk))
	}
	sort.Strings(names)
	sort.Strings(all)
	if !reflect.DeepEqual(names, all) {
		t.Errorf("Tasks = %v, want %v", all, names)
	}
}
