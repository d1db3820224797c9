package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"maintsignals/functions/command"
	"maintsignals/functions/web"
	natsconf "maintsignals/infra/nats"
	"maintsignals/infra/provision"
	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/shared/embedded"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/natsconn/natstest"
	"maintsignals/test/testenv"
)

// TestView_TheReaderRoleSuffices runs the view as a user of the reader role on a server with
// the users of infra/nats: every page reads what it shows, and the live pages follow.
func TestView_TheReaderRoleSuffices(t *testing.T) {
	op, fn, admin, reader, writer := natstest.NewUser(t), natstest.NewUser(t), natstest.NewUser(t), natstest.NewUser(t), natstest.NewUser(t)
	users, err := natsconf.NkeyUsers([]natsconf.User{
		{Name: "operator", Role: natsconf.RoleOperator, Nkey: op.Public},
		{Name: "function", Role: natsconf.RoleFunction, Nkey: fn.Public},
		{Name: "admin", Role: natsconf.RoleAdmin, Nkey: admin.Public},
		{Name: "reader", Role: natsconf.RoleReader, Nkey: reader.Public},
	})
	if err != nil {
		t.Fatal(err)
	}
	// writer stands for the policies and campaign functions, whose roles are theirs to define:
	// it may do anything.
	users = append(users, &server.NkeyUser{Nkey: writer.Public})
	s := testenv.Server(t, embedded.Config{StoreDir: t.TempDir(), Nkeys: users})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	connect := func(u natstest.User, r natsconf.Role) *natsconn.Conn { return connectAs(t, ctx, s, u, r.InboxPrefix()) }
	ojs := connect(op, natsconf.RoleOperator).JS
	if _, err := provision.Run(ctx, ojs, provision.Config{Tick: time.Minute, Partitions: 2}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	// What the policies and campaign functions keep.
	wjs := connect(writer, natsconf.RoleOperator).JS
	cs := newCampaignStore(t, wjs)
	pols, err := wjs.KeyValue(ctx, domain.PoliciesBucket)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { done <- command.Run(ctx, connect(fn, natsconf.RoleFunction).JS, command.Config{Log: quiet}) }()
	view, url := serve(t, ctx, connect(reader, natsconf.RoleReader).JS, web.Config{}, done)
	defer func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("stopped with %v", err)
			}
		}
	}()
	testenv.Eventually(t, 10*time.Second, "the view loads the bucket", view.Loaded)

	sender := client.FromConn(connect(admin, natsconf.RoleAdmin), client.Options{Logger: quiet})
	id := rid("s1", "c1")
	live := events(t, ctx, url+"/")
	sctx, scancel := context.WithTimeout(ctx, 15*time.Second)
	defer scancel()
	if _, _, err := sender.PublishOnly(sctx, domain.Command{ID: "admin-1", ResourceID: id, Task: domain.TaskPending, Actor: "admin"}); err != nil {
		t.Fatal(err)
	}
	within(t, live, "change", 2*time.Second)
	if _, err := pols.Put(ctx, domain.PolicyKey("subscriptions/s1"), []byte(`{"scope":"/subscriptions/s1"}`)); err != nil {
		t.Fatal(err)
	}
	spec, rej := campaignspec.ParseSpec([]byte(campaignSpec))
	if rej != nil {
		t.Fatal(rej)
	}
	c := campaign.NewCampaign(spec, time.Now().UTC())
	cs.putCampaign(c)
	cs.putEntity(c.ID, id, 0, campaign.PhasePlanned)
	var counts campaign.Counts
	counts.Add(campaign.PhasePlanned, 1)
	cs.publishEvent(campaign.Event{Campaign: c.ID, Type: campaign.EventCreated, Status: campaign.StatusPlanning, Generation: 1, Phases: counts, At: c.CreatedAt})

	var fleet web.FleetPage
	testenv.Eventually(t, 5*time.Second, "the fleet page", func() bool {
		return getJSON(t, url+"/", &fleet) == http.StatusOK && fleet.Entities == 1
	})
	var ep web.EntityPage
	testenv.Eventually(t, 5*time.Second, "the entity page with its policy", func() bool {
		return getJSON(t, url+"/entities/"+domain.MustKey(id), &ep) == http.StatusOK && ep.Policy != nil && len(ep.History) > 0
	})
	if len(ep.History) != 1 || ep.History[0].CommandID != "admin-1" || ep.Policy.Scope != "/subscriptions/s1" {
		t.Errorf("entity page: %+v", ep)
	}
	var cp web.CampaignPage
	testenv.Eventually(t, 5*time.Second, "the campaign page", func() bool {
		return getJSON(t, url+"/campaigns/"+c.ID, &cp) == http.StatusOK && cp.Entities == 1
	})
	if len(cp.Burndown) != 2 || cp.Burndown[0].Event != "created" {
		t.Errorf("campaign burndown as a reader: %+v", cp.Burndown)
	}
}

// TestView_CampaignPagesWaitForTheCampaignsBucket runs the view as a user who may not read
// the campaigns bucket's stream: the fleet is served, but the view is not loaded (readiness
// says so) and the campaigns' pages answer 503 rather than that there is no campaign.
func TestView_CampaignPagesWaitForTheCampaignsBucket(t *testing.T) {
	op, blind := natstest.NewUser(t), natstest.NewUser(t)
	users := []*server.NkeyUser{{Nkey: op.Public}, {Nkey: blind.Public, Permissions: &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.INFO.KV_" + domain.CampaignsBucket}}}}}
	s := testenv.Server(t, embedded.Config{StoreDir: t.TempDir(), Nkeys: users})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	connect := func(u natstest.User) *natsconn.Conn { return connectAs(t, ctx, s, u, "") }
	if _, err := provision.Run(ctx, connect(op).JS, provision.Config{Tick: time.Minute, Partitions: 2}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	done := make(chan error, 1)
	view, url := serve(t, ctx, connect(blind).JS, web.Config{}, done)
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stopped with %v", err)
		}
	}()
	var fleet web.FleetPage
	testenv.Eventually(t, 10*time.Second, "the fleet page", func() bool { return getJSON(t, url+"/", &fleet) == http.StatusOK })
	var body struct {
		Message string `json:"error"`
	}
	for _, page := range []string{"/campaigns", "/campaigns/pucm-2026-12"} {
		if code := getJSON(t, url+page, &body); code != http.StatusServiceUnavailable || !strings.Contains(body.Message, "being read") {
			t.Errorf("%s: %d %q, want 503, being read", page, code, body.Message)
		}
	}
	if view.Loaded() {
		t.Error("the view says it is loaded without the campaigns bucket")
	}
}

// connectAs connects in process to s as user u, with its inbox prefix ("" the default).
func connectAs(t *testing.T, ctx context.Context, s *embedded.Server, u natstest.User, inboxPrefix string) *natsconn.Conn {
	t.Helper()
	conn, err := natsconn.Connect(ctx, natsconn.Options{Servers: s.InProcessURL(), NkeyFile: u.SeedFile,
		InboxPrefix: inboxPrefix, Logger: quiet, Extra: []nats.Option{nats.InProcessServer(s.Server)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.NC.Close)
	return conn
}
