package command_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"maintsignals/functions/command"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

func TestHandle_AppliesCommandsAndPublishesOneEventEach(t *testing.T) {
	env := testenv.Start(t)
	startReplicas(t, env, 1, command.Config{})
	key := domain.MustKey(cluster)
	start := time.Date(2026, 12, 14, 2, 0, 0, 0, time.UTC)
	send(t, env.JS, domain.Command{ID: "c-1", ResourceID: cluster, Task: domain.TaskPending, Reason: "PUCM", Window: &domain.Window{Start: start, End: start.Add(4 * time.Hour)}, Actor: "sre"})
	send(t, env.JS, domain.Command{ID: "c-2", ResourceID: strings.ToUpper(cluster), Task: domain.TaskEverything})
	send(t, env.JS, domain.Command{ID: "c-3", ResourceID: cluster, Task: domain.TaskUpdateFailed, Error: "etcd quorum lost"})

	evs := events(t, env.JS, key, 3)
	want := []struct {
		id       string
		from, to domain.State
	}{{"c-1", domain.StateNone, domain.StatePending}, {"c-2", domain.StatePending, domain.StatePlanned}, {"c-3", domain.StatePlanned, domain.StatePlanned}}
	for i, w := range want {
		ev := evs[i]
		if ev.CommandID != w.id || ev.Outcome != domain.OutcomeApplied || ev.From != w.from || ev.To != w.to || ev.Revision == 0 {
			t.Errorf("event %d = %+v, want %s applied %s -> %s", i, ev, w.id, w.from, w.to)
		}
	}
	rec, rev := record(t, env, key)
	if rec.ResourceID != cluster {
		t.Errorf("resourceId %q, want the first casing seen %q", rec.ResourceID, cluster)
	}
	if rec.State != domain.StatePlanned || rec.Updating || rec.LastError != "etcd quorum lost" || rec.LastCommandID != "c-3" || rec.Version != domain.RecordVersion {
		t.Errorf("record %+v", rec)
	}
	if rec.Window == nil || !rec.Window.Start.Equal(start) || rec.Reason != "PUCM" {
		t.Errorf("announced window/reason lost: %+v %q", rec.Window, rec.Reason)
	}
	if evs[2].Error != "etcd quorum lost" {
		t.Errorf("the UpdateFailed outcome does not carry its error for the audit: %+v", evs[2])
	}
	if evs[2].Revision != rev {
		t.Errorf("last event revision %d, record revision %d", evs[2].Revision, rev)
	}
}

func TestHandle_RejectsBadInputWithoutTouchingTheRecord(t *testing.T) {
	env := testenv.Start(t)
	startReplicas(t, env, 1, command.Config{})
	key := domain.MustKey(cluster)
	other := domain.MustKey(cluster + "-other")
	cases := []struct {
		name       string
		key, msgID string
		body       string
		code       domain.Code
		target     string
	}{
		{"not JSON", key, "b-1", `{"id":`, domain.CodeInvalidRequestContent, ""},
		{"not an object", key, "b-2", `["b-2"]`, domain.CodeInvalidRequestContent, ""},
		{"invalid UTF-8", key, "b-3", "{\"id\":\"b-3\",\"reason\":\"\xff\"}", domain.CodeInvalidRequestContent, ""},
		{"too large", key, "b-4", `{"id":"b-4","reason":"` + strings.Repeat("x", 70<<10) + `"}`, domain.CodeInvalidRequestContent, ""},
		{"missing id", key, "", `{"resourceId":"` + cluster + `","task":"Pending"}`, domain.CodeInvalidParameter, "id"},
		{"header differs from id", key, "other", `{"id":"b-6","resourceId":"` + cluster + `","task":"Pending"}`, domain.CodeInvalidParameter, "id"},
		{"resourceId on another key", other, "b-7", `{"id":"b-7","resourceId":"` + cluster + `","task":"Pending"}`, domain.CodeInvalidParameter, "resourceId"},
		{"wrongly cased task", key, "b-8", `{"id":"b-8","resourceId":"` + cluster + `","task":"pending"}`, domain.CodeInvalidParameter, "task"},
		{"wrong type", key, "b-9", `{"id":"b-9","resourceId":"` + cluster + `","task":"Pending","force":"yes"}`, domain.CodeInvalidParameter, "force"},
		{"window end before start", key, "b-10", `{"id":"b-10","resourceId":"` + cluster + `","task":"Pending","window":{"start":"2026-12-02T00:00:00Z","end":"2026-12-01T00:00:00Z"}}`, domain.CodeInvalidParameter, "window.end"},
		{"outcome with no update", key, "b-11", `{"id":"b-11","resourceId":"` + cluster + `","task":"UpdateSucceeded"}`, domain.CodeRequestNotAllowed, "task"},
	}
	for _, c := range cases {
		sendRaw(t, env.JS, c.key, c.msgID, []byte(c.body))
	}
	got := append(events(t, env.JS, key, len(cases)-1), events(t, env.JS, other, 1)...)
	byID := map[string]domain.Event{}
	for _, ev := range got {
		byID[ev.CommandID] = ev
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := c.msgID
			if c.name == "header differs from id" {
				id = "b-6"
			}
			ev, ok := byID[id]
			if c.name == "missing id" {
				ev, ok = byID[""]
			}
			if !ok {
				t.Fatalf("no event for %q in %+v", id, got)
			}
			if ev.Outcome != domain.OutcomeRejected || ev.Code != c.code || ev.Target != c.target || ev.Message == "" {
				t.Fatalf("event %+v, want rejected %s target %q", ev, c.code, c.target)
			}
			if ev.From != domain.StateNone || ev.To != domain.StateNone {
				t.Fatalf("rejection from/to %s/%s, want the unchanged state", ev.From, ev.To)
			}
		})
	}
	if _, rev := record(t, env, key); rev != 0 {
		t.Fatalf("a rejected command wrote the record (revision %d)", rev)
	}
	// A good command after the poison is applied.
	send(t, env.JS, domain.Command{ID: "good", ResourceID: cluster, Task: domain.TaskPending})
	evs := events(t, env.JS, key, len(cases))
	if last := evs[len(evs)-1]; last.CommandID != "good" || last.Outcome != domain.OutcomeApplied {
		t.Fatalf("last event %+v", last)
	}
}

func TestHandle_WriteWithoutEventIsCompletedOnRedelivery(t *testing.T) {
	env := testenv.Start(t)
	events0 := &flakyEvents{Publisher: env.JS, n: 2}
	startReplicas(t, env, 1, command.Config{Events: events0})
	key := domain.MustKey(cluster)
	send(t, env.JS, domain.Command{ID: "once", ResourceID: cluster, Task: domain.TaskPending})
	send(t, env.JS, domain.Command{ID: "next", ResourceID: cluster, Task: domain.TaskEverything})
	evs := events(t, env.JS, key, 2)
	time.Sleep(200 * time.Millisecond)
	evs = readEvents(t, env.JS, domain.EventSubject(key))
	if len(evs) != 2 || evs[0].CommandID != "once" || evs[1].CommandID != "next" {
		t.Fatalf("events %+v, want exactly once then next", evs)
	}
	rec, rev := record(t, env, key)
	if rev != 2 {
		t.Fatalf("record revision %d, want 2 writes for 2 commands (the redelivery wrote nothing)", rev)
	}
	if rec.State != domain.StatePlanned {
		t.Fatalf("state %s", rec.State)
	}
}

func TestHandle_AckLostAfterEventPublishesNothingNew(t *testing.T) {
	env := testenv.Start(t)
	var failed bool
	loseAck := func(h function.Handler) function.Handler {
		return func(ctx context.Context, m function.Message) error {
			err := h(ctx, m)
			if err == nil && !failed {
				failed = true // the handler dies after the event, before the ack
				return context.DeadlineExceeded
			}
			return err
		}
	}
	startReplicas(t, env, 1, command.Config{}, loseAck)
	key := domain.MustKey(cluster)
	send(t, env.JS, domain.Command{ID: "x-1", ResourceID: cluster, Task: domain.TaskCustomerActionNeeded})
	send(t, env.JS, domain.Command{ID: "x-2", ResourceID: cluster, Task: domain.TaskNone})
	events(t, env.JS, key, 2)
	time.Sleep(200 * time.Millisecond)
	evs := readEvents(t, env.JS, domain.EventSubject(key))
	if len(evs) != 2 || evs[0].Outcome != domain.OutcomeApplied || evs[0].CommandID != "x-1" {
		t.Fatalf("events %+v", evs)
	}
	if _, rev := record(t, env, key); rev != 2 {
		t.Fatalf("revision %d, want 2", rev)
	}
}

func TestHandle_SameIDTwiceIsAppliedOnce(t *testing.T) {
	env := testenv.Start(t)
	startReplicas(t, env, 2, command.Config{})
	key := domain.MustKey(cluster)
	cmd := domain.Command{ID: "dup-1", ResourceID: cluster, Task: domain.TaskPending}
	send(t, env.JS, cmd)
	if ack := send(t, env.JS, cmd); !ack.Duplicate {
		t.Fatalf("second publish inside the duplicate window was stored: %+v", ack)
	}
	// The same id again without the header (or after the window): the stream stores it, the
	// handler recognises it.
	b, _ := cmd.Encode()
	sendRaw(t, env.JS, key, "", b)
	evs := events(t, env.JS, key, 2)
	var applied, dup int
	for _, ev := range evs {
		switch ev.Outcome {
		case domain.OutcomeApplied:
			applied++
		case domain.OutcomeDuplicate:
			dup++
		}
	}
	if applied != 1 || dup != 1 || len(evs) != 2 {
		t.Fatalf("events %+v, want one applied and one duplicate", evs)
	}
	if _, rev := record(t, env, key); rev != 1 {
		t.Fatalf("revision %d, want 1", rev)
	}
}

func TestHandle_TransientFailureIsRetriedThenApplied(t *testing.T) {
	env := testenv.Start(t)
	st, _ := store.Open(context.Background(), env.JS)
	startReplicas(t, env, 1, command.Config{Records: &flakyRecords{Records: st, n: 3}})
	key := domain.MustKey(cluster)
	send(t, env.JS, domain.Command{ID: "t-1", ResourceID: cluster, Task: domain.TaskPending})
	evs := events(t, env.JS, key, 1)
	if evs[0].Outcome != domain.OutcomeApplied {
		t.Fatalf("event %+v", evs[0])
	}
}

// TestHandle_DeadLetterWhenTheBucketRefusesWrites: a command whose record can be read but not
// written is dead-lettered after its deliveries, although its dead letter's fence cannot be
// written either: it is published without it, and the entity's next commands are not held.
func TestHandle_DeadLetterWhenTheBucketRefusesWrites(t *testing.T) {
	env := testenv.Start(t)
	st, _ := store.Open(context.Background(), env.JS)
	startReplicas(t, env, 1, command.Config{Records: &refusedWrites{Records: st}, MaxDeliver: 3})
	key := domain.MustKey(cluster)
	send(t, env.JS, domain.Command{ID: "w-1", ResourceID: cluster, Task: domain.TaskPending})
	evs := events(t, env.JS, key, 1)
	if evs[0].Outcome != domain.OutcomeDeadLettered || evs[0].CommandID != "w-1" || !strings.Contains(evs[0].Message, "bucket refuses writes") {
		t.Fatalf("event %+v, want w-1 dead-lettered for the refused write", evs[0])
	}
	if _, rev := record(t, env, key); rev != 0 {
		t.Fatalf("record written at revision %d, want none", rev)
	}
}

// refusedWrites reads the bucket and fails every write.
type refusedWrites struct{ command.Records }

func (refusedWrites) Put(context.Context, string, store.Versioned, domain.Record) (uint64, error) {
	return 0, errors.New("injected: the bucket refuses writes")
}

func TestHandle_ExhaustedRetriesAreDeadLettered(t *testing.T) {
	env := testenv.Start(t)
	st, _ := store.Open(context.Background(), env.JS)
	broken := &flakyRecords{Records: st, n: -1}
	startReplicas(t, env, 1, command.Config{Records: broken, MaxDeliver: 3})
	key := domain.MustKey(cluster)
	send(t, env.JS, domain.Command{ID: "d-1", ResourceID: cluster, Task: domain.TaskPending})
	evs := events(t, env.JS, key, 1)
	if evs[0].Outcome != domain.OutcomeDeadLettered || evs[0].CommandID != "d-1" || !strings.Contains(evs[0].Message, "bucket unreachable") {
		t.Fatalf("event %+v", evs[0])
	}
	s, _ := env.JS.Stream(context.Background(), domain.DLQStream)
	m, err := s.GetLastMsgForSubject(context.Background(), domain.DLQSubject(key))
	if err != nil {
		t.Fatalf("no dead letter: %v", err)
	}
	if r := m.Header.Get(function.HeaderDLQReason); !strings.Contains(r, "gave up after 3 deliveries") {
		t.Fatalf("dead-letter reason %q", r)
	}
	// The cause goes away: the next command is applied, the dead letter did not block the entity.
	broken.mu.Lock()
	broken.n = 0
	broken.mu.Unlock()
	send(t, env.JS, domain.Command{ID: "d-2", ResourceID: cluster, Task: domain.TaskPending})
	if evs := events(t, env.JS, key, 2); evs[1].Outcome != domain.OutcomeApplied {
		t.Fatalf("event %+v", evs[1])
	}
}

func TestDeadLetter_AppliedCommandKeepsItsAppliedOutcome(t *testing.T) {
	env := testenv.Start(t)
	// Every try writes nothing new after the first, and the event fails three times: the
	// runtime gives up, yet the outcome must say what happened to the record.
	startReplicas(t, env, 1, command.Config{Events: &flakyEvents{Publisher: env.JS, n: 3}, MaxDeliver: 3})
	key := domain.MustKey(cluster)
	send(t, env.JS, domain.Command{ID: "a-1", ResourceID: cluster, Task: domain.TaskPending})
	evs := events(t, env.JS, key, 1)
	if evs[0].Outcome != domain.OutcomeApplied || evs[0].CommandID != "a-1" {
		t.Fatalf("event %+v, want the applied outcome", evs[0])
	}
	if rec, rev := record(t, env, key); rev != 1 || rec.State != domain.StatePending {
		t.Fatalf("record %+v at revision %d", rec, rev)
	}
}

func TestHandle_RecreatedCommandsStreamStillApplies(t *testing.T) {
	env := testenv.Start(t)
	st, _ := store.Open(context.Background(), env.JS)
	key := domain.MustKey(cluster)
	// A record written when the commands stream had reached sequence 1000.
	if _, err := st.Put(context.Background(), key, store.Versioned{}, domain.Record{ResourceID: cluster, State: domain.StatePending, LastCommandSeq: 1000, LastCommandID: "old"}); err != nil {
		t.Fatal(err)
	}
	startReplicas(t, env, 1, command.Config{})
	send(t, env.JS, domain.Command{ID: "after-reset", ResourceID: cluster, Task: domain.TaskEverything})
	if ev := events(t, env.JS, key, 1)[0]; ev.Outcome != domain.OutcomeApplied || ev.To != domain.StatePlanned {
		t.Fatalf("event %+v: a command on a recreated stream must be handled", ev)
	}
}

func TestHandle_CorruptRecordIsDeadLetteredAtOnce(t *testing.T) {
	env := testenv.Start(t)
	key := domain.MustKey(cluster)
	testenv.PutRawRecord(t, env.JS, key, []byte("{not a record"))
	startReplicas(t, env, 1, command.Config{})
	send(t, env.JS, domain.Command{ID: "c-1", ResourceID: cluster, Task: domain.TaskPending})
	ev := events(t, env.JS, key, 1)[0]
	if ev.Outcome != domain.OutcomeDeadLettered || !strings.Contains(ev.Message, "corrupt record") || strings.Contains(ev.Message, "gave up") {
		t.Fatalf("event %+v, want dead-lettered at once for the corrupt record", ev)
	}
}
