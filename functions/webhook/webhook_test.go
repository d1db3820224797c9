package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"maintsignals/functions/command"
	"maintsignals/functions/webhook"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// Commands go through the real command function; each subscription gets exactly the events its
// filters keep, as valid CloudEvents signed per Standard Webhooks, in order per cluster.
func TestWebhook_DeliversSignedCloudEventsPerSubscriptionFilters(t *testing.T) {
	env := testenv.Start(t)
	all, applied, pending, prefixed := newReceiver(t, nil), newReceiver(t, nil), newReceiver(t, nil), newReceiver(t, nil)
	planned, inWindow, action, noAction := newReceiver(t, nil), newReceiver(t, nil), newReceiver(t, nil), newReceiver(t, nil)
	urls := map[string]string{}
	for name, rc := range map[string]*receiver{"all": all, "applied": applied, "pending": pending, "prefixed": prefixed,
		"planned": planned, "inwindow": inWindow, "action": action, "noaction": noAction} {
		srv := httptest.NewServer(rc)
		t.Cleanup(srv.Close)
		urls[name] = srv.URL + "/hooks/maint?token=abc"
	}
	subA, subB, subC, subD := sub("all", urls["all"]), sub("applied", urls["applied"]), sub("pending", urls["pending"]), sub("prefixed", urls["prefixed"])
	subB.Types = []string{domain.CETypeApplied}
	subC.States = []domain.State{domain.StatePending}
	subD.ResourcePrefix = cluster(1)[:len(cluster(1))-2] + "C1" // any casing of …/c1
	// The annotations' filters.
	yes, no := true, false
	subE, subF, subG, subH := sub("planned", urls["planned"]), sub("inwindow", urls["inwindow"]), sub("action", urls["action"]), sub("noaction", urls["noaction"])
	subE.Categories, subF.InWindow, subG.ActionRequired, subH.ActionRequired = []string{domain.CategoryPlanned}, &yes, &yes, &no
	// A long timeout: no delivery is retried for being slow on a busy machine.
	start(t, env, webhook.Config{Subscriptions: []webhook.Subscription{subA, subB, subC, subD, subE, subF, subG, subH}, Timeout: 15 * time.Second})
	now := time.Now().UTC()

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = command.Run(ctx, env.JS, command.Config{}) }()
	steps := []domain.Command{
		{ID: "a1", ResourceID: cluster(1), Task: domain.TaskPending},
		{ID: "b1", ResourceID: cluster(2), Task: domain.TaskPending},
		{ID: "a2", ResourceID: cluster(1), Task: domain.TaskEverything},
		{ID: "b2", ResourceID: cluster(2), Task: domain.TaskUpdateSucceeded}, // rejected: no update
		{ID: "a3", ResourceID: cluster(1), Task: domain.TaskUpdateSucceeded},
		{ID: "c1", ResourceID: cluster(10), Task: domain.TaskPending}, // …/c10: not under the …/c1 prefix, which ends at a path segment
		{ID: "d1", ResourceID: cluster(3), Task: domain.TaskPending, Window: &domain.Window{Start: now.Add(-time.Hour), End: now.Add(time.Hour)}},
		{ID: "d2", ResourceID: cluster(3), Task: domain.TaskOperatorUpdate}, // planned, inside its window
		{ID: "e1", ResourceID: cluster(4), Task: domain.TaskCustomerActionNeeded},
		{ID: "e2", ResourceID: cluster(4), Task: domain.TaskCertificatesRenewal, Force: true}, // unplanned
	}
	for _, c := range steps {
		b, _ := c.Encode()
		m := nats.NewMsg(domain.CommandSubject(domain.MustKey(c.ResourceID)))
		m.Data = b
		m.Header.Set(domain.HeaderMsgID, c.ID)
		if _, err := env.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 20*time.Second, "every event delivered to the unfiltered subscription", func() bool { return len(all.succeeded()) == len(steps) })
	ids := func(ds []delivery) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.id[:2])
		}
		slices.Sort(out)
		return out
	}
	for _, name := range []string{"applied", "pending", "prefixed", "planned", "inwindow", "action", "noaction"} { // each its own consumer, at its own pace
		testenv.WebhookSettled(t, env.JS, name, 20*time.Second)
	}
	for _, c := range []struct {
		rc   *receiver
		want []string
	}{
		{applied, []string{"a1", "a2", "a3", "b1", "c1", "d1", "d2", "e1", "e2"}},
		{pending, []string{"a1", "b1", "b2", "c1", "d1"}}, // b2 is rejected in Pending: its resulting state is Pending
		{prefixed, []string{"a1", "a2", "a3"}},
		{planned, []string{"a2", "a3", "d2"}}, // announced work and its outcome, not e2's unplanned work
		{inWindow, []string{"d2"}},            // a2 and a3: no window was announced
		{action, []string{"e1"}},
		{noAction, []string{"a1", "a2", "a3", "b1", "c1", "d1", "d2", "e2"}}, // applied, not e1; not b2 (rejected: no annotation)
	} {
		if got := ids(c.rc.succeeded()); !slices.Equal(got, c.want) {
			t.Errorf("delivered %v, want %v", got, c.want)
		}
	}
	got := all.succeeded()
	var c1 []string
	for _, d := range got {
		if d.subject == cluster(1) {
			c1 = append(c1, d.id[:2])
		}
		if d.ceType == "" {
			t.Errorf("delivery %s has no type", d.id)
		}
	}
	if !slices.Equal(c1, []string{"a1", "a2", "a3"}) {
		t.Fatalf("cluster 1 deliveries %v, want in command order", c1)
	}
	if n := len(all.requests()); n != len(steps) {
		t.Fatalf("%d requests for %d events: nothing should have been retried", n, len(steps))
	}
}

// A new subscription starts at the events stored after it; with FromStart at the oldest. A
// subscription that has progress keeps it whatever FromStart says.
func TestWebhook_NewSubscriptionStartsAtNewEventsUnlessFromStart(t *testing.T) {
	env := testenv.Start(t)
	old := publishEvent(t, env.JS, cluster(1), 1, domain.StatePending)
	// "New" is new to the webhook feed, which sources the events stream.
	testenv.Eventually(t, 5*time.Second, "the event in the webhook feed", func() bool {
		s, err := env.JS.Stream(context.Background(), domain.WebhookStream)
		return err == nil && s.CachedInfo().State.Msgs == 1
	})
	rcNew, rcAll := newReceiver(t, nil), newReceiver(t, nil)
	srvNew, srvAll := httptest.NewServer(rcNew), httptest.NewServer(rcAll)
	t.Cleanup(srvNew.Close)
	t.Cleanup(srvAll.Close)
	stop := start(t, env, webhook.Config{Subscriptions: []webhook.Subscription{sub("new", srvNew.URL)}})
	stop2 := start(t, env, webhook.Config{Subscriptions: []webhook.Subscription{sub("all", srvAll.URL)}, FromStart: true})
	fresh := publishEvent(t, env.JS, cluster(1), 2, domain.StatePending)
	testenv.Eventually(t, 10*time.Second, "the new event delivered to both", func() bool {
		return len(rcNew.succeeded()) == 1 && len(rcAll.succeeded()) == 2
	})
	if rcNew.succeeded()[0].id != fresh {
		t.Fatalf("new subscription got %s, want only %s (not %s)", rcNew.succeeded()[0].id, fresh, old)
	}
	stop()
	stop2()
	// Restarted with FromStart, the existing subscription goes on from where it was.
	start(t, env, webhook.Config{Subscriptions: []webhook.Subscription{sub("new", srvNew.URL)}, FromStart: true})
	third := publishEvent(t, env.JS, cluster(1), 3, domain.StatePending)
	testenv.Eventually(t, 10*time.Second, "the third event", func() bool { return len(rcNew.succeeded()) == 2 })
	time.Sleep(200 * time.Millisecond)
	if got := rcNew.succeeded(); got[1].id != third || len(rcNew.requests()) != 2 {
		t.Fatalf("after restart: %v", got)
	}
}

var _ = http.StatusOK

// Notices reach the webhooks beside the outcome events (the feed sources both streams), and
// the filters read a notice's type and state.
func TestWebhook_DeliversNotices(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	rc := newReceiver(t, nil)
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	due := sub("due", srv.URL)
	due.Types = []string{domain.CETypeNoticeDue, domain.CETypeApplied}
	due.States = []domain.State{domain.StatePending}
	start(t, env, webhook.Config{Subscriptions: []webhook.Subscription{due}})
	notice := func(id, kind string, state domain.State) {
		m := nats.NewMsg(domain.NoticeSubject(domain.MustKey(cluster(1))))
		m.Data = []byte(`{"noticeId":"` + id + `","kind":"` + kind + `","resourceId":"` + cluster(1) + `","state":"` + string(state) + `"}`)
		m.Header.Set(domain.HeaderMsgID, id)
		domain.SetCloudEventHeaders(m.Header, domain.NoticeCEType(kind), id, cluster(1), time.Now())
		if _, err := env.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	notice("n-1", "reminder", domain.StatePending) // type filtered out
	notice("n-2", "due", domain.StatePlanned)      // state filtered out
	notice("n-3", "due", domain.StatePending)
	ev := publishEvent(t, env.JS, cluster(1), 4, domain.StatePending)
	testenv.Eventually(t, 10*time.Second, "the due notice and the event", func() bool { return len(rc.succeeded()) == 2 })
	time.Sleep(200 * time.Millisecond)
	// The feed sources the two streams side by side: each keeps its own order, but an event and
	// a notice stored close together may come in either order.
	types := map[string]string{}
	for _, d := range rc.succeeded() {
		types[d.id] = d.ceType
	}
	if len(rc.requests()) != 2 || types["n-3"] != domain.CETypeNoticeDue || types[ev] != domain.CETypeApplied {
		t.Fatalf("delivered %v", types)
	}
}

// TestWebhook_SkipsPolicyOutcomes: a policy command's outcome (maint.evt.policy.<scope>, in the
// events stream and so in the feed) is not an entity's event: no subscription gets it, and the
// entities' events around it are delivered in order.
func TestWebhook_SkipsPolicyOutcomes(t *testing.T) {
	env := testenv.Start(t)
	rc := newReceiver(t, nil)
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	start(t, env, webhook.Config{Subscriptions: []webhook.Subscription{sub("all", srv.URL)}})
	first := publishEvent(t, env.JS, cluster(1), 1, domain.StatePending)
	scope := "/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333"
	m := nats.NewMsg(domain.PolicyEventSubject(domain.MustKey(scope)))
	m.Data, _ = domain.EncodePolicyEvent(domain.PolicyEvent{CommandID: "p-1", Scope: scope, Action: domain.PolicySet, Outcome: domain.OutcomeApplied, At: time.Now()})
	m.Header.Set(domain.HeaderMsgID, "p-1:1")
	domain.SetCloudEventHeaders(m.Header, domain.PolicyOutcomeCEType(domain.OutcomeApplied), "p-1:1", scope, time.Now())
	if _, err := env.JS.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	second := publishEvent(t, env.JS, cluster(1), 2, domain.StateNone)
	testenv.Eventually(t, 10*time.Second, "the two events", func() bool { return len(rc.succeeded()) >= 2 })
	time.Sleep(300 * time.Millisecond)
	got := rc.requests()
	if len(got) != 2 || got[0].id != first || got[1].id != second {
		t.Fatalf("delivered %+v, want the two entity events only", got)
	}
}
