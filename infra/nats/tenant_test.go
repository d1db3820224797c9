package natsconf_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	natsconf "maintsignals/infra/nats"
	"maintsignals/infra/provision"
	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignstore"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/shared/embedded"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/natsconn/natstest"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

// Two tenants' entities, and a customer confined to the first.
const (
	tenantA = "/subscriptions/aaaaaaaa-0000-0000-0000-000000000001"
	tenantB = "/subscriptions/bbbbbbbb-0000-0000-0000-000000000002"
)

// campaignID is a campaign holding every entity of both tenants.
const campaignID = "pucm"

func tenantID(sub string, i int) string {
	return fmt.Sprintf("%s/resourceGroups/rg-%d/providers/Microsoft.RedHatOpenShift/openShiftClusters/c%d", sub, i, i)
}

type tenantStack struct {
	op, fn, cp *natsconn.Conn
	customer   *natsconn.Conn
	cl         *client.Client
	a, b       []string // resource IDs of each tenant
}

// startTenants runs a server with an operator and a customer confined to tenant A, and
// writes a record, an event, a notice and a campaign phase for each of four entities of A and
// of B.
func startTenants(t *testing.T) *tenantStack {
	t.Helper()
	op, fn, cp, cust := natstest.NewUser(t), natstest.NewUser(t), natstest.NewUser(t), natstest.NewUser(t)
	users, err := natsconf.NkeyUsers([]natsconf.User{
		{Name: "operator", Role: natsconf.RoleOperator, Nkey: op.Public},
		{Name: "functions", Role: natsconf.RoleFunction, Nkey: fn.Public},
		{Name: "campaigns", Role: natsconf.RoleCampaign, Nkey: cp.Public},
		{Name: "alice", Role: natsconf.RoleCustomer, Nkey: cust.Public, Scopes: []string{tenantA}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := testenv.Server(t, embedded.Config{StoreDir: t.TempDir(), Nkeys: users})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	connect := func(u natstest.User, inbox string) *natsconn.Conn {
		t.Helper()
		conn, err := natsconn.Connect(testenv.Context(t, 10*time.Second), natsconn.Options{
			Servers: s.InProcessURL(), NkeyFile: u.SeedFile, InboxPrefix: inbox, Logger: quiet,
			Extra: []nats.Option{nats.InProcessServer(s.Server)},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		return conn
	}
	st := &tenantStack{op: connect(op, natsconf.RoleOperator.InboxPrefix()), fn: connect(fn, natsconf.RoleFunction.InboxPrefix()), cp: connect(cp, natsconf.RoleCampaign.InboxPrefix()),
		customer: connect(cust, natsconf.TenantInboxPrefix("alice"))}
	ctx := testenv.Context(t, time.Minute)
	if _, err := provision.Run(ctx, st.op.JS, provision.Config{Tick: time.Minute, Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		st.a, st.b = append(st.a, tenantID(tenantA, i)), append(st.b, tenantID(tenantB, i))
	}
	for _, id := range append(append([]string{}, st.a...), st.b...) {
		key := domain.MustKey(id)
		rec, _ := domain.EncodeRecord(domain.Record{ResourceID: id, State: domain.StatePending, LastCommandSeq: 1, Version: domain.RecordVersion})
		for subject, data := range map[string][]byte{
			domain.RecordSubject(key): rec,
			domain.EventSubject(key):  fmt.Appendf(nil, `{"commandId":"c-%s","resourceId":%q,"outcome":"applied","task":"Pending"}`, key[len(key)-2:], id),
			domain.NoticeSubject(key): fmt.Appendf(nil, `{"noticeId":"n-%s","resourceId":%q,"kind":"reminder"}`, key[len(key)-2:], id),
		} {
			if _, err := st.fn.JS.Publish(ctx, subject, data); err != nil {
				t.Fatal(err)
			}
		}
		phase := fmt.Appendf(nil, `{"phase":"planned","resourceId":%q,"generation":1,"wave":-1}`, id)
		if _, err := st.cp.JS.Publish(ctx, campaignstore.EntitySubject(campaignID, key), phase); err != nil {
			t.Fatal(err)
		}
	}
	for _, tenant := range []string{tenantA, tenantB} {
		testenv.PutPolicy(t, st.fn.JS, tenant, `"minNotice": "24h"`)
	}
	scopes, _ := natsconf.ParseScopes([]string{tenantA})
	st.cl = client.FromConn(st.customer, client.Options{Logger: quiet, Scopes: scopes})
	return st
}

// denied runs a request of the customer's and wants the server to refuse it (a permission
// violation, reported at once), not to answer.
func denied(t *testing.T, c *natsconn.Conn, what string, fn func(context.Context) error) {
	t.Helper()
	ctx := testenv.Context(t, 5*time.Second)
	err := c.Guard(ctx, "$JS.API.>", fn)
	if !errors.Is(err, natsconn.ErrPermissionDenied) {
		t.Errorf("%s: %v, want a permission violation", what, err)
	}
}

// Through NATS itself, a customer confined to tenant A gets nothing of tenant B's: each way a
// reader of the records, events, notices, policies and campaign phases could ask is refused or answers
// with A's alone, and its counterpart for A's own works.
func TestTenant_CustomerReadsItsOwnAndNothingOfAnothers(t *testing.T) {
	st := startTenants(t)
	c := st.customer
	aKey, bKey := domain.MustKey(st.a[0]), domain.MustKey(st.b[0])
	direct := func(key string) func(context.Context) error {
		return func(ctx context.Context) error {
			cell := domain.CellOf(key)
			m, err := c.NC.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+cell.RecordsStream()+"."+domain.RecordSubject(key), nil)
			if err == nil && m.Header.Get("Status") != "" {
				err = fmt.Errorf("status %s", m.Header.Get("Status"))
			}
			return err
		}
	}
	consumer := func(stream, filter string) func(context.Context) error {
		return func(ctx context.Context) error {
			cfg := jetstream.OrderedConsumerConfig{}
			if filter != "" {
				cfg.FilterSubjects = []string{filter}
			}
			_, err := c.JS.OrderedConsumer(ctx, stream, cfg)
			return err
		}
	}
	aCell, bCell := domain.CellOf(aKey), domain.CellOf(bKey)

	t.Run("refused", func(t *testing.T) {
		denied(t, c, "direct get of B's record", direct(bKey))
		denied(t, c, "kv get (binding the bucket reads its stream info)", func(ctx context.Context) error {
			kv, err := c.JS.KeyValue(ctx, bCell.RecordsBucket())
			if err == nil {
				_, err = kv.Get(ctx, domain.Located(bKey))
			}
			return err
		})
		denied(t, c, "stream info of a bucket (its subjects filter lists every key)", func(ctx context.Context) error {
			s, err := c.JS.Stream(ctx, aCell.RecordsStream())
			if err == nil {
				_, err = s.Info(ctx, jetstream.WithSubjectFilter(">"))
			}
			return err
		})
		denied(t, c, "kv ls / watch: a consumer on a whole bucket", consumer(aCell.RecordsStream(), "$KV."+aCell.RecordsBucket()+".>"))
		denied(t, c, "a consumer of a bucket without a filter", consumer(aCell.RecordsStream(), ""))
		denied(t, c, "a consumer on B's records", consumer(bCell.RecordsStream(), "$KV."+bCell.RecordsBucket()+"."+domain.Located(bKey)))
		denied(t, c, "stream view of the events (no filter)", consumer(bCell.EventsStream(), ""))
		denied(t, c, "a consumer on B's events", consumer(bCell.EventsStream(), domain.EventSubject(bKey)))
		denied(t, c, "a consumer on B's notices", consumer(bCell.NoticesStream(), domain.NoticeSubject(bKey)))
		denied(t, c, "a direct get by sequence", func(ctx context.Context) error {
			_, err := c.NC.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+bCell.RecordsStream(), []byte(`{"seq":1}`))
			return err
		})
		denied(t, c, "a message get by body", func(ctx context.Context) error {
			_, err := c.NC.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+bCell.RecordsStream(), []byte(`{"last_by_subj":"`+domain.RecordSubject(bKey)+`"}`))
			return err
		})
		denied(t, c, "the consumers' names", func(ctx context.Context) error {
			_, err := c.NC.RequestWithContext(ctx, "$JS.API.CONSUMER.NAMES."+bCell.EventsStream(), nil)
			return err
		})
		denied(t, c, "the policies bucket", consumer(domain.PoliciesBucketStream, ""))
		denied(t, c, "the campaigns' entities", consumer("KV_"+domain.CampaignEntitiesBucket, ""))
		denied(t, c, "a campaign's phases of every tenant", consumer("KV_"+domain.CampaignEntitiesBucket, campaignstore.EntitiesPrefix(campaignID)+">"))
		denied(t, c, "a direct get of B's campaign phase", func(ctx context.Context) error {
			m, err := c.NC.RequestWithContext(ctx, "$JS.API.DIRECT.GET.KV_"+domain.CampaignEntitiesBucket+"."+campaignstore.EntitySubject(campaignID, bKey), nil)
			if err == nil && m.Header.Get("Status") != "" {
				err = fmt.Errorf("status %s", m.Header.Get("Status"))
			}
			return err
		})
		denied(t, c, "the campaigns themselves", consumer("KV_"+domain.CampaignsBucket, ""))
		denied(t, c, "a direct get of B's policy", func(ctx context.Context) error {
			m, err := c.NC.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+domain.PoliciesBucketStream+"."+domain.PolicySubject(domain.MustKey(tenantB)), nil)
			if err == nil && m.Header.Get("Status") != "" {
				err = fmt.Errorf("status %s", m.Header.Get("Status"))
			}
			return err
		})
		denied(t, c, "a consumer on B's policies", consumer(domain.PoliciesBucketStream, domain.PoliciesPrefix+mustScope(t, tenantB).Tokens()))
		denied(t, c, "the old-style events stream", consumer(domain.EventsStream, ""))
	})

	t.Run("subscriptions", func(t *testing.T) {
		ctx := testenv.Context(t, 10*time.Second)
		for _, subject := range []string{domain.EventPrefix + ">", domain.NoticePrefix + ">", "_INBOX.>", "_INBOX_customer.>", "$KV.>"} {
			err := c.Guard(ctx, subject, func(ctx context.Context) error {
				sub, err := c.NC.SubscribeSync(subject)
				if err != nil {
					return err
				}
				defer sub.Unsubscribe()
				_ = c.NC.Flush()
				_, err = sub.NextMsgWithContext(ctx)
				return err
			})
			if !errors.Is(err, natsconn.ErrPermissionDenied) {
				t.Errorf("subscribe %s: %v, want a permission violation", subject, err)
			}
		}
		// Its own tenant's live events come; another's do not.
		sub, err := c.NC.SubscribeSync(domain.EventPrefix + "*." + mustScope(t, tenantA).Tokens())
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		if err := c.NC.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{st.b[1], st.a[1]} {
			if err := st.fn.NC.Publish(domain.EventSubject(domain.MustKey(id)), fmt.Appendf(nil, `{"resourceId":%q,"outcome":"applied"}`, id)); err != nil {
				t.Fatal(err)
			}
		}
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil || domain.KeyFromSubject(m.Subject) != domain.MustKey(st.a[1]) {
			t.Fatalf("first live event: %v %v, want A's", m, err)
		}
		if m, err := sub.NextMsg(300 * time.Millisecond); err == nil {
			t.Errorf("a second live event reached the customer: %s", m.Subject)
		}
	})

	t.Run("allowed for its own", func(t *testing.T) {
		ctx := testenv.Context(t, 20*time.Second)
		if err := c.Guard(ctx, "$JS.API.>", direct(aKey)); err != nil {
			t.Errorf("direct get of A's record: %v", err)
		}
		e, err := st.cl.Get(ctx, st.a[0])
		if err != nil || !e.Exists() || e.Record.ResourceID != st.a[0] {
			t.Errorf("get A's entity: %+v, %v", e, err)
		}
		if _, err := st.cl.Get(ctx, st.b[0]); !errors.Is(err, client.ErrNotPermitted) {
			t.Errorf("get B's entity: %v, want not permitted", err)
		}
		var listed []string
		if err := st.cl.Scan(ctx, func(e client.Entity, err error) error {
			listed = append(listed, e.Record.ResourceID)
			return err
		}); err != nil || len(listed) != len(st.a) {
			t.Errorf("list: %v (%v), want A's %d entities", listed, err, len(st.a))
		}
		for _, id := range listed {
			if !strings.HasPrefix(id, tenantA) {
				t.Errorf("list shows %s, of another tenant", id)
			}
		}
		evs, err := st.cl.Events(ctx, client.StreamFilter{})
		if err != nil || len(evs.Items) < len(st.a) {
			t.Errorf("history of the fleet: %d events, %v", len(evs.Items), err)
		}
		for _, ev := range evs.Items {
			if !strings.HasPrefix(ev.ResourceID, tenantA) {
				t.Errorf("history shows an event of %s", ev.ResourceID)
			}
		}
		if h, err := st.cl.History(ctx, st.a[2]); err != nil || len(h) != 1 {
			t.Errorf("history of A's entity: %v, %v", h, err)
		}
		if _, err := st.cl.History(ctx, st.b[2]); !errors.Is(err, client.ErrNotPermitted) {
			t.Errorf("history of B's entity: %v, want not permitted", err)
		}
		if ph, ok, err := st.cl.CampaignPhase(ctx, st.a[1], campaignID); err != nil || !ok || ph.Phase != campaign.PhasePlanned || ph.ResourceID != st.a[1] {
			t.Errorf("A's entity's campaign phase: %+v %v %v", ph, ok, err)
		}
		if _, _, err := st.cl.CampaignPhase(ctx, st.b[1], campaignID); !errors.Is(err, client.ErrNotPermitted) {
			t.Errorf("B's entity's campaign phase: %v, want not permitted", err)
		}
		phases := 0
		if err := c.Guard(ctx, "$JS.API.>", func(ctx context.Context) error {
			return store.ScanLast(ctx, c.JS, "KV_"+domain.CampaignEntitiesBucket, campaignstore.EntitiesPrefix(campaignID)+mustScope(t, tenantA).Tokens(),
				func(m jetstream.Msg, _ uint64) error {
					if !strings.HasPrefix(domain.KeyFromSubject(m.Subject()), domain.MustKey(tenantA)) {
						t.Errorf("a phase of another tenant: %s", m.Subject())
					}
					phases++
					return nil
				})
		}); err != nil || phases != len(st.a) {
			t.Errorf("A's phases in the campaign: %d (%v), want %d", phases, err, len(st.a))
		}
		if p, ok, err := st.cl.PolicyFor(ctx, st.a[0]); err != nil || !ok || p.Revision.Key != domain.MustKey(tenantA) {
			t.Errorf("the policy in force for A's entity: %+v %v %v", p, ok, err)
		}
		if _, _, err := st.cl.PolicyOf(ctx, tenantB); !errors.Is(err, client.ErrNotPermitted) {
			t.Errorf("B's policy: %v, want not permitted", err)
		}
		if ps, err := st.cl.Policies(ctx); err != nil || len(ps) != 1 || ps[0].Revision.Key != domain.MustKey(tenantA) {
			t.Errorf("the policies: %+v %v, want A's alone", ps, err)
		}
		ns, err := st.cl.Notices(ctx, "")
		if err != nil || len(ns) != len(st.a) {
			t.Errorf("notices: %d, %v; want A's %d", len(ns), err, len(st.a))
		}
		w, err := st.cl.Watch(ctx, client.WatchOptions{Since: time.Now().Add(-time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		for range len(st.a) {
			ev, err := w.Next(ctx)
			if err != nil || !strings.HasPrefix(ev.ResourceID, tenantA) {
				t.Fatalf("watch: %+v, %v", ev, err)
			}
		}
	})
}

func mustScope(t *testing.T, s string) domain.Scope {
	t.Helper()
	sc, err := domain.ParseScope(s)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// A customer confined to a resource group reads the policy of its subscription (it covers its
// entities) and no other scope's above its own.
func TestTenantPermissions_AResourceGroupReadsItsSubscriptionsPolicy(t *testing.T) {
	rg := mustScope(t, tenantA+"/resourceGroups/rg-1")
	p, err := natsconf.TenantPermissions("bob", []domain.Scope{rg})
	if err != nil {
		t.Fatal(err)
	}
	get := func(scope string) string {
		return "$JS.API.DIRECT.GET." + domain.PoliciesBucketStream + "." + domain.PolicySubject(domain.MustKey(scope))
	}
	for scope, want := range map[string]bool{
		tenantA + "/resourceGroups/rg-1": true,
		tenantA:                          true,
		tenantA + "/resourceGroups/rg-2": false,
		tenantB:                          false,
	} {
		if got := slices.Contains(p.Publish.Allow, get(scope)) || slices.ContainsFunc(p.Publish.Allow, func(a string) bool {
			return strings.HasSuffix(a, ".>") && strings.HasPrefix(get(scope), strings.TrimSuffix(a, ">"))
		}); got != want {
			t.Errorf("direct get of the policy of %s allowed: %v, want %v", scope, got, want)
		}
	}
}
