package webhook_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/subscriptions"
	"maintsignals/functions/webhook"
	"maintsignals/shared/dlq"
	"maintsignals/shared/domain"
	"maintsignals/shared/subscription"
	"maintsignals/test/testenv"
)

// The tenant of cluster(i), and another one.
const (
	tenantRG = "/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333/resourceGroups/rg"
	otherRG  = "/subscriptions/0b1f6471-1bf0-4dda-aec3-444455556666/resourceGroups/rg"
)

// elsewhere is cluster i of the other tenant.
func elsewhere(i int) string {
	return fmt.Sprintf("%s/providers/Microsoft.RedHatOpenShift/openShiftClusters/c%d", otherRG, i)
}

// tlsReceiver is a receiver behind HTTPS, with the pool that trusts it.
func tlsReceiver(t *testing.T) (*receiver, string, *x509.CertPool) {
	t.Helper()
	rc := newReceiver(t, nil)
	srv := httptest.NewTLSServer(rc)
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return rc, srv.URL + "/hook?token=s3cr3t", pool
}

// startApplier runs the subscriptions function until the test ends.
func startApplier(t *testing.T, env *testenv.Env) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- subscriptions.Run(ctx, env.JS, subscriptions.Config{Log: testenv.Quiet()}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("subscriptions function: %v", err)
		}
	})
}

// selfService is the webhook configuration of the tests' self-service subscriptions: their
// endpoints are on loopback, behind the receiver's certificate.
func selfService(pool *x509.CertPool) webhook.Config {
	return webhook.Config{SelfService: true, AllowPrivateEndpoints: true, Roots: pool}
}

// subCommand sends a subscription command (create with url, or delete when url is "") of name in
// scope and waits for its outcome, which it returns.
func subCommand(t *testing.T, js jetstream.JetStream, id, name, scope, url string) domain.SubscriptionEvent {
	t.Helper()
	cmd := subscription.Command{ID: id, Action: domain.SubscriptionDelete, Name: name, Scope: scope}
	if url != "" {
		cmd.Action, cmd.URL, cmd.Secret = domain.SubscriptionCreate, url, secret
	}
	body, err := cmd.Encode()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := subscription.ParseScope(scope)
	if err != nil {
		t.Fatal(err)
	}
	key := domain.SubscriptionKey(domain.TenantOf(sc.Key), name)
	m := nats.NewMsg(domain.SubscriptionCommandSubject(key))
	m.Data = body
	m.Header.Set(domain.HeaderMsgID, id)
	if _, err := js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	var ev domain.SubscriptionEvent
	testenv.Eventually(t, 10*time.Second, "the outcome of "+id, func() bool {
		s, err := js.Stream(context.Background(), domain.SubscriptionEventsStream)
		if err != nil {
			return false
		}
		raw, err := s.GetLastMsgForSubject(context.Background(), domain.SubscriptionEventSubject(key))
		if err != nil {
			return false
		}
		ev, err = domain.DecodeSubscriptionEvent(raw.Data)
		return err == nil && ev.CommandID == id
	})
	if ev.Outcome != domain.OutcomeApplied {
		t.Fatalf("%s: %+v", id, ev)
	}
	return ev
}

// consumerExists reports whether the delivery's consumer is on the feed.
func consumerExists(t *testing.T, js jetstream.JetStream, delivery string) bool {
	t.Helper()
	_, err := js.Consumer(context.Background(), domain.WebhookStream, domain.WebhookConsumer(delivery))
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// ids are the webhook-ids of deliveries.
func ids(ds []delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.id
	}
	return out
}

// A subscription created with a command delivers, within 5 s of its outcome and without a
// restart, the events and notices of its scope stored after its creation, and nothing of
// another tenant's; deleted, it stops within 5 s and its consumer goes.
func TestSelfService_CreateDeliversWithinFiveSecondsAndDeleteStops(t *testing.T) {
	env := testenv.Start(t)
	rc, url, pool := tlsReceiver(t)
	startApplier(t, env)
	start(t, env, selfService(pool))
	before := publishEvent(t, env.JS, cluster(1), 1, domain.StatePending) // before the subscription: never delivered

	created := subCommand(t, env.JS, "s-1", "crm", tenantRG, url)
	at := time.Now()
	mine := publishEvent(t, env.JS, cluster(1), 2, domain.StatePlanned)
	publishEvent(t, env.JS, elsewhere(1), 3, domain.StatePlanned)
	notice := nats.NewMsg(domain.NoticeSubject(domain.MustKey(cluster(2))))
	notice.Data = []byte(`{"noticeId":"n-1","kind":"due","resourceId":"` + cluster(2) + `","state":"Pending"}`)
	notice.Header.Set(domain.HeaderMsgID, "n-1")
	domain.SetCloudEventHeaders(notice.Header, domain.NoticeCEType("due"), "n-1", cluster(2), time.Now())
	if _, err := env.JS.PublishMsg(context.Background(), notice); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the event and the notice of its scope", func() bool { return len(rc.succeeded()) >= 2 })
	t.Logf("first deliveries %s after the create's outcome", time.Since(at).Round(time.Millisecond))
	c, err := env.JS.Consumer(context.Background(), domain.WebhookStream, domain.WebhookConsumer(created.Delivery))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range c.CachedInfo().Config.FilterSubjects[:2] { // the server reads it its tenant's alone
		if !strings.Contains(f, ".0b1f6471-1bf0-4dda-aec3-111122223333.rg.") {
			t.Errorf("consumer filter %s: not its tenant's", f)
		}
	}

	subCommand(t, env.JS, "s-2", "crm", tenantRG, "")
	at = time.Now()
	testenv.Eventually(t, 5*time.Second, "the deleted subscription's consumer removed", func() bool { return !consumerExists(t, env.JS, created.Delivery) })
	t.Logf("consumer removed %s after the delete's outcome", time.Since(at).Round(time.Millisecond))
	after := publishEvent(t, env.JS, cluster(1), 4, domain.StateNone)
	time.Sleep(time.Second)
	got := ids(rc.succeeded())
	slices.Sort(got)
	if fmt.Sprint(got) != fmt.Sprint([]string{mine, "n-1"}) {
		t.Fatalf("delivered %v, want %s and the notice (not %s before the creation, nor %s after the delete, nor the other tenant's)", got, mine, before, after)
	}
}

// A subscription starts at its creation, by the create command's stored time, however late
// the webhook function first sees it: what was stored before is never delivered, what was
// stored after (while no webhook function ran) is.
func TestSelfService_StartsAtItsCreationWhenTheFunctionComesLater(t *testing.T) {
	env := testenv.Start(t)
	rc, url, pool := tlsReceiver(t)
	startApplier(t, env)
	publishEvent(t, env.JS, cluster(1), 1, domain.StatePending)
	created := subCommand(t, env.JS, "s-1", "crm", tenantRG, url)
	want := map[string][]string{}
	for i := 2; i < 5; i++ {
		want[cluster(i%2)] = append(want[cluster(i%2)], publishEvent(t, env.JS, cluster(i%2), i, domain.StatePending))
	}
	testenv.Eventually(t, 10*time.Second, "the feed copied the events", func() bool {
		s, err := env.JS.Stream(context.Background(), domain.WebhookStream)
		return err == nil && s.CachedInfo().State.Msgs >= 4
	})
	start(t, env, selfService(pool))
	testenv.WebhookSettled(t, env.JS, created.Delivery, 20*time.Second)
	if got := ids(rc.succeeded()); len(got) != 3 {
		t.Fatalf("delivered %v, want %v (the events stored after the creation)", got, want)
	}
	inOrder(t, rc.succeeded(), want)
}

// Two replicas deliver each event of a self-service subscription once, in order per entity;
// the operator's file subscription, beside it, keeps delivering.
func TestSelfService_TwoReplicasDeliverOnceBesideTheFile(t *testing.T) {
	env := testenv.Start(t)
	rc, url, pool := tlsReceiver(t)
	file := newReceiver(t, nil)
	fileSrv := httptest.NewServer(file)
	t.Cleanup(fileSrv.Close)
	startApplier(t, env)
	cfg := selfService(pool)
	cfg.Subscriptions = []webhook.Subscription{sub("ops", fileSrv.URL)}
	start(t, env, cfg)
	start(t, env, cfg)
	created := subCommand(t, env.JS, "s-1", "crm", tenantRG, url)
	testenv.Eventually(t, 5*time.Second, "the subscription's consumer", func() bool { return consumerExists(t, env.JS, created.Delivery) })
	want := map[string][]string{}
	for i := range 60 {
		res := cluster(i % 4)
		want[res] = append(want[res], publishEvent(t, env.JS, res, 100+i, domain.StatePending))
	}
	testenv.WebhookSettled(t, env.JS, created.Delivery, 30*time.Second)
	testenv.WebhookSettled(t, env.JS, "ops", 30*time.Second)
	if all, once := len(rc.requests()), len(rc.succeeded()); all != 60 || once != 60 {
		t.Fatalf("%d requests, %d distinct deliveries: want each of the 60 events once", all, once)
	}
	inOrder(t, rc.succeeded(), want)
	if n := len(file.succeeded()); n != 60 {
		t.Fatalf("the file subscription delivered %d of 60", n)
	}
}

// A self-service subscription may not reach a private address unless the function allows it:
// the delivery is dead-lettered for it, named by its delivery name, and never sent.
func TestSelfService_PrivateEndpointIsRefused(t *testing.T) {
	env := testenv.Start(t)
	rc, url, pool := tlsReceiver(t)
	startApplier(t, env)
	cfg := selfService(pool)
	cfg.AllowPrivateEndpoints = false
	start(t, env, cfg)
	created := subCommand(t, env.JS, "s-1", "crm", tenantRG, url)
	testenv.Eventually(t, 5*time.Second, "the subscription's consumer", func() bool { return consumerExists(t, env.JS, created.Delivery) })
	id := publishEvent(t, env.JS, cluster(1), 1, domain.StatePending)
	var letters []dlq.Letter
	testenv.Eventually(t, 10*time.Second, "the delivery dead-lettered", func() bool {
		var err error
		letters, _, err = dlq.ListWhere(context.Background(), env.JS, dlq.Filter{Subscription: created.Delivery})
		return err == nil && len(letters) == 1
	})
	if letters[0].CommandID != id || !strings.Contains(letters[0].Reason, "public addresses only") || len(rc.requests()) != 0 {
		t.Fatalf("dead letter %+v, %d requests", letters[0], len(rc.requests()))
	}
}

// The consumer of a subscription deleted while no webhook function ran is removed when one
// starts; one whose secret is not its create command's waits, delivering nothing, until the
// right secret is there; a revision that does not read is passed over.
func TestSelfService_StartCleansUpAndWaitsForTheSecret(t *testing.T) {
	env := testenv.Start(t)
	rc, url, pool := tlsReceiver(t)
	startApplier(t, env)
	stop := start(t, env, selfService(pool))
	gone := subCommand(t, env.JS, "s-1", "gone", tenantRG, url)
	testenv.Eventually(t, 5*time.Second, "the subscription's consumer", func() bool { return consumerExists(t, env.JS, gone.Delivery) })
	stop()
	subCommand(t, env.JS, "s-2", "gone", tenantRG, "")
	kept := subCommand(t, env.JS, "s-3", "kept", tenantRG, url)
	kv, err := env.JS.KeyValue(context.Background(), domain.SubscriptionSecretsBucket)
	if err != nil {
		t.Fatal(err)
	}
	const key = "0b1f6471-1bf0-4dda-aec3-111122223333.rg.kept"
	good, err := kv.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), key, []byte("whsec_c2hvcnQ=")); err != nil { // no command's
		t.Fatal(err)
	}
	broken := nats.NewMsg(domain.SubscriptionSubject("0b1f6471-1bf0-4dda-aec3-111122223333.rg.broken"))
	broken.Data = []byte("{not json")
	if _, err := env.JS.PublishMsg(context.Background(), broken); err != nil { // a revision that does not read: passed over
		t.Fatal(err)
	}
	start(t, env, selfService(pool))
	testenv.Eventually(t, 5*time.Second, "the deleted subscription's consumer removed", func() bool { return !consumerExists(t, env.JS, gone.Delivery) })
	time.Sleep(500 * time.Millisecond)
	if consumerExists(t, env.JS, kept.Delivery) {
		t.Fatal("a subscription without its secret started")
	}
	m := nats.NewMsg(domain.SubscriptionSecretSubject(key))
	m.Data = good.Value()
	m.Header.Set(domain.HeaderSubscriptionCommand, "s-3")
	if _, err := env.JS.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	id := publishEvent(t, env.JS, cluster(1), 1, domain.StatePending)
	testenv.Eventually(t, 10*time.Second, "delivered once its secret is there", func() bool { return len(rc.succeeded()) == 1 })
	if got := rc.succeeded()[0].id; got != id {
		t.Fatalf("delivered %s, want %s", got, id)
	}
}
