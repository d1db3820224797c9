package client_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

func TestListWhere_PrefixUpdatingWindowForgotten(t *testing.T) {
	env := testenv.Start(t)
	soon := time.Date(2026, 12, 14, 0, 0, 0, 0, time.UTC)
	for _, r := range []domain.Record{
		{ResourceID: "/subscriptions/a/resourceGroups/RG-1/c1", State: domain.StatePending, Window: &domain.Window{Start: soon, End: soon.Add(time.Hour)}},
		{ResourceID: "/subscriptions/a/resourceGroups/rg-1/c2", State: domain.StatePlanned, Updating: true, Task: domain.TaskEverything},
		{ResourceID: "/subscriptions/a/resourceGroups/rg-2/c3", State: domain.StatePending, Window: &domain.Window{Start: soon.Add(30 * 24 * time.Hour), End: soon.Add(31 * 24 * time.Hour)}},
		{ResourceID: "/subscriptions/a/resourceGroups/rg-1/gone", State: domain.StateNone, ForgottenAt: soon},
	} {
		b, _ := domain.EncodeRecord(r)
		testenv.PutRawRecord(t, env.JS, domain.MustKey(r.ResourceID), b)
	}
	c, err := client.New(testenv.Connect(t, env.Server), quiet)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    client.ListFilter
		want string
	}{
		{"every tracked entity", client.ListFilter{}, "c1 c2 c3"},
		{"prefix, any casing", client.ListFilter{Prefix: "/subscriptions/a/resourcegroups/rg-1/"}, "c1 c2"},
		{"updating", client.ListFilter{Updating: true}, "c2"},
		{"window before", client.ListFilter{WindowBefore: soon.Add(7 * 24 * time.Hour)}, "c1"},
		{"state and prefix", client.ListFilter{State: domain.StatePending, Prefix: "/subscriptions/a/resourceGroups/rg-2"}, "c3"},
		{"with the forgotten", client.ListFilter{Prefix: "/subscriptions/a/resourceGroups/rg-1/", Forgotten: true}, "c1 c2 gone"},
	} {
		l, err := c.ListWhere(context.Background(), tc.f)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range l.Entities {
			names = append(names, e.Record.ResourceID[strings.LastIndex(e.Record.ResourceID, "/")+1:])
		}
		if got := strings.Join(names, " "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestEventsAndNotices_SinceKindLimit(t *testing.T) {
	env := testenv.Start(t)
	ctx := testenv.Context(t, 10*time.Second)
	publish := func(subject string, v any, msgID string) {
		t.Helper()
		m := nats.NewMsg(subject)
		switch v := v.(type) {
		case domain.Event:
			m.Data, _ = domain.EncodeEvent(v)
		case domain.Notice:
			m.Data, _ = domain.EncodeNotice(v)
		}
		m.Header.Set(domain.HeaderMsgID, msgID)
		if _, err := env.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	ids := []string{"/e/a", "/e/b"}
	var mid time.Time
	for i := range 6 {
		if i == 3 {
			time.Sleep(50 * time.Millisecond)
			mid = time.Now()
			time.Sleep(50 * time.Millisecond)
		}
		rid := ids[i%2]
		key := domain.MustKey(rid)
		publish(domain.EventSubject(key), domain.Event{CommandID: fmt.Sprintf("c-%d", i), ResourceID: rid, Task: domain.TaskNone, Outcome: domain.OutcomeApplied}, fmt.Sprintf("e-%d", i))
		kind := domain.NoticeReminder
		if i%3 == 2 {
			kind = domain.NoticeStuck
		}
		publish(domain.NoticeSubject(key), domain.Notice{NoticeID: fmt.Sprintf("n-%d", i), Kind: kind, ResourceID: rid}, fmt.Sprintf("n-%d", i))
	}
	c, err := client.New(testenv.Connect(t, env.Server), quiet)
	if err != nil {
		t.Fatal(err)
	}
	evs := func(f client.StreamFilter) string {
		p, err := c.Events(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, e := range p.Items {
			s = append(s, e.CommandID)
		}
		return fmt.Sprintf("%v+%d", s, p.Omitted)
	}
	for f, want := range map[client.StreamFilter]string{
		{}:                   "[c-0 c-1 c-2 c-3 c-4 c-5]+0",
		{Since: mid}:         "[c-3 c-4 c-5]+0",
		{Limit: 2}:           "[c-4 c-5]+4",
		{ResourceID: "/e/a"}: "[c-0 c-2 c-4]+0",
		{ResourceID: "/e/a", Since: mid, Limit: 5}: "[c-4]+0",
		{Since: time.Now().Add(time.Hour)}:         "[]+0",
	} {
		if got := evs(f); got != want {
			t.Errorf("Events(%+v) = %s, want %s", f, got, want)
		}
	}
	nts := func(f client.NoticeFilter) string {
		p, err := c.NoticesWhere(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, n := range p.Items {
			s = append(s, n.NoticeID)
		}
		return fmt.Sprintf("%v+%d", s, p.Omitted)
	}
	for _, tc := range []struct {
		f    client.NoticeFilter
		want string
	}{
		{client.NoticeFilter{}, "[n-0 n-1 n-2 n-3 n-4 n-5]+0"},
		{client.NoticeFilter{Kinds: []domain.NoticeKind{domain.NoticeStuck}}, "[n-2 n-5]+0"},
		{client.NoticeFilter{StreamFilter: client.StreamFilter{Since: mid, Limit: 2}, Kinds: []domain.NoticeKind{domain.NoticeReminder}}, "[n-3 n-4]+0"},
		{client.NoticeFilter{StreamFilter: client.StreamFilter{Limit: 1}, Kinds: []domain.NoticeKind{domain.NoticeReminder}}, "[n-4]+3"},
	} {
		if got := nts(tc.f); got != tc.want {
			t.Errorf("NoticesWhere(%+v) = %s, want %s", tc.f, got, tc.want)
		}
	}
}

func TestSend_SaysWhenACommandTracksAnEntity(t *testing.T) {
	c := setup(t, true)
	ctx := testenv.Context(t, 20*time.Second)
	for _, step := range []struct {
		cmd    domain.Command
		tracks bool
	}{
		{cmd("t-1", domain.TaskPending), true},
		{cmd("t-2", domain.TaskNone), false},
		{cmd("t-3", domain.TaskForget), false},
		{cmd("t-4", domain.TaskUpdateSucceeded), false}, // rejected: still not tracked
		{cmd("t-5", domain.TaskCustomerActionNeeded), true},
	} {
		res, err := c.Send(ctx, step.cmd)
		if res == nil {
			t.Fatalf("%s: %v", step.cmd.ID, err)
		}
		if res.Tracks != step.tracks {
			t.Errorf("%s (%s %s): Tracks = %t, want %t", step.cmd.ID, step.cmd.Task, res.Event.Outcome, res.Tracks, step.tracks)
		}
	}
}
