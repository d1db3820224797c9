package natsconf_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/subscriptions"
	natsconf "maintsignals/infra/nats"
	"maintsignals/infra/provision"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/shared/embedded"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/natsconn/natstest"
	"maintsignals/shared/subscription"
	"maintsignals/test/testenv"
)

// Tenants of the self-service subscriptions test: contoso has a whole subscription, fabrikam
// one resource group of another.
const (
	contosoSub  = "/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333"
	fabrikamSub = "/subscriptions/0b1f6471-1bf0-4dda-aec3-444455556666"
	fabrikamRG  = fabrikamSub + "/resourceGroups/rg-f"
)

// subscriptionParties starts a server with an operator, a function, an admin, a reader and two
// customers with scopes (contoso, fabrikam), provisions it, runs the subscriptions function,
// and connects each party.
func subscriptionParties(t *testing.T) map[string]*client.Client {
	t.Helper()
	parties := []struct {
		name   string
		role   natsconf.Role
		scopes []string
	}{
		{"operator", natsconf.RoleOperator, nil}, {"function", natsconf.RoleFunction, nil}, {"admin", natsconf.RoleAdmin, nil},
		{"reader", natsconf.RoleReader, nil}, {"updater", natsconf.RoleUpdater, nil},
		{"contoso", natsconf.RoleCustomer, []string{contosoSub}}, {"fabrikam", natsconf.RoleCustomer, []string{fabrikamRG}},
	}
	var users []natsconf.User
	seeds := map[string]natstest.User{}
	for _, p := range parties {
		u := natstest.NewUser(t)
		seeds[p.name] = u
		users = append(users, natsconf.User{Name: p.name, Role: p.role, Nkey: u.Public, Scopes: p.scopes})
	}
	nk, err := natsconf.NkeyUsers(users)
	if err != nil {
		t.Fatal(err)
	}
	s := testenv.Server(t, embedded.Config{StoreDir: t.TempDir(), Nkeys: nk})
	out := map[string]*client.Client{}
	for _, p := range parties {
		inbox := p.role.InboxPrefix()
		if len(p.scopes) > 0 {
			inbox = natsconf.TenantInboxPrefix(p.name)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn, err := natsconn.Connect(ctx, natsconn.Options{Servers: s.InProcessURL(), Extra: []nats.Option{nats.InProcessServer(s.Server)},
			Name: p.name, NkeyFile: seeds[p.name].SeedFile, InboxPrefix: inbox, Logger: slog.New(slog.DiscardHandler)})
		cancel()
		if err != nil {
			t.Fatalf("connect %s: %v", p.name, err)
		}
		out[p.name] = client.FromConn(conn, client.Options{Logger: testenv.Quiet()})
		t.Cleanup(out[p.name].Close)
	}
	ctx := testenv.Context(t, 30*time.Second)
	if _, err := provision.Run(ctx, out["operator"].JS, provision.Config{Tick: time.Minute}); err != nil {
		t.Fatal(err)
	}
	fctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- subscriptions.Run(fctx, out["function"].JS, subscriptions.Config{Log: testenv.Quiet()})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("subscriptions function: %v", err)
		}
	})
	return out
}

func createCmd(id, name, scope string) subscription.Command {
	return subscription.Command{ID: id, Action: domain.SubscriptionCreate, Name: name, Scope: scope,
		URL: "https://hooks.example.com/in", Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
}

// refused fails unless err is a permission refusal.
func refused(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, natsconn.ErrPermissionDenied) {
		t.Errorf("%s: %v, want a permission refusal", what, err)
	}
}

// Customers manage the subscriptions of their own tenants only, through NATS permissions: each
// creates, lists and deletes its own; another's subject, list, secret and the commands' stream
// are refused by the server, as is writing a subscription or an outcome by hand; an admin
// lists every one but reads no secret; no other role sends subscription commands.
func TestSubscriptions_CustomersAreConfinedToTheirTenants(t *testing.T) {
	p := subscriptionParties(t)
	ctx := testenv.Context(t, 60*time.Second)
	for _, c := range []struct {
		party string
		cmd   subscription.Command
	}{
		{"contoso", createCmd("c-1", "crm", contosoSub)},
		{"contoso", createCmd("c-2", "crm", contosoSub+"/resourceGroups/rg-c")},
		{"fabrikam", createCmd("f-1", "crm", fabrikamRG)},
	} {
		if res, err := p[c.party].SendSubscription(ctx, c.cmd); err != nil || res.Event.Outcome != domain.OutcomeApplied {
			t.Fatalf("%s creates %s: %+v, %v", c.party, c.cmd.ID, res, err)
		}
	}
	_, err := p["contoso"].SendSubscription(ctx, createCmd("c-3", "crm", fabrikamRG))
	refused(t, "contoso creates in fabrikam's tenant", err)
	_, err = p["fabrikam"].SendSubscription(ctx, createCmd("f-2", "crm", fabrikamSub+"/resourceGroups/rg-other"))
	refused(t, "fabrikam creates in another resource group of its subscription", err)
	_, err = p["fabrikam"].SendSubscription(ctx, subscription.Command{ID: "f-3", Action: domain.SubscriptionDelete, Name: "crm", Scope: contosoSub})
	refused(t, "fabrikam deletes contoso's", err)

	for party, want := range map[string]int{"contoso": 2, "fabrikam": 1, "admin": 3} {
		subs, err := p[party].Subscriptions(ctx)
		if err != nil || len(subs) != want {
			t.Errorf("%s lists %d subscriptions (%v), want %d", party, len(subs), err, want)
		}
		for _, s := range subs {
			if party == "fabrikam" && !strings.HasPrefix(s.Record.Scope, fabrikamRG) || party == "contoso" && !strings.HasPrefix(s.Record.Scope, contosoSub) {
				t.Errorf("%s sees %s", party, s.Record.Scope)
			}
		}
	}
	rawReads(t, ctx, p)
	if res, err := p["fabrikam"].SendSubscription(ctx, subscription.Command{ID: "f-4", Action: domain.SubscriptionDelete, Name: "crm", Scope: fabrikamRG}); err != nil || res.Event.Outcome != domain.OutcomeApplied {
		t.Fatalf("fabrikam deletes its own: %+v, %v", res, err)
	}
	if subs, err := p["admin"].Subscriptions(ctx); err != nil || len(subs) != 2 {
		t.Errorf("after the delete the admin lists %d (%v), want 2", len(subs), err)
	}
}

// rawReads checks, as a raw NATS client of each party would try it, that what is not the
// party's is refused by the server.
func rawReads(t *testing.T, ctx context.Context, p map[string]*client.Client) {
	t.Helper()
	scan := func(c *client.Client, tokens string) error {
		return c.Guard(ctx, "$JS.API.>", func(ctx context.Context) error {
			return subscription.Scan(ctx, c.JS, tokens, func(subscription.Stored, error) error { return nil })
		})
	}
	refused(t, "fabrikam lists every subscription", scan(p["fabrikam"], ">"))
	refused(t, "fabrikam lists contoso's", scan(p["fabrikam"], "0b1f6471-1bf0-4dda-aec3-111122223333.>"))
	refused(t, "fabrikam lists its whole subscription above its resource group", scan(p["fabrikam"], "0b1f6471-1bf0-4dda-aec3-444455556666.>"))
	refused(t, "the reader lists the subscriptions", scan(p["reader"], ">"))
	for _, party := range []string{"contoso", "admin", "reader"} {
		c := p[party]
		err := c.Guard(ctx, "$JS.API.>", func(ctx context.Context) error {
			_, err := c.JS.OrderedConsumer(ctx, domain.SubscriptionSecretsStream, jetstream.OrderedConsumerConfig{})
			return err
		})
		refused(t, party+" reads the secrets", err)
		err = c.Guard(ctx, "$JS.API.>", func(ctx context.Context) error {
			_, err := c.JS.OrderedConsumer(ctx, domain.SubscriptionsStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{domain.SubscriptionCommandPrefix + ">"}})
			return err
		})
		refused(t, party+" reads the commands (and their secrets)", err)
	}
	for _, party := range []string{"contoso", "admin"} {
		for _, subject := range []string{domain.SubscriptionSubject("0b1f6471-1bf0-4dda-aec3-111122223333._.x"), domain.SubscriptionEventSubject("0b1f6471-1bf0-4dda-aec3-111122223333._.x")} {
			_, err := p[party].Conn.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: []byte(`{}`)})
			refused(t, party+" writes "+subject, err)
		}
	}
	for _, party := range []string{"reader", "updater"} {
		_, err := p[party].SendSubscription(ctx, createCmd(party+"-1", "crm", contosoSub))
		refused(t, party+" sends a subscription command", err)
	}
	err := p["fabrikam"].Guard(ctx, domain.SubscriptionEventPrefix+">", func(ctx context.Context) error {
		sub, err := p["fabrikam"].NC.SubscribeSync(domain.SubscriptionEventPrefix + ">")
		if err != nil {
			return err
		}
		defer func() { _ = sub.Unsubscribe() }()
		_, err = sub.NextMsgWithContext(ctx)
		return err
	})
	refused(t, "fabrikam listens to every outcome", err)
}

// A user's scopes are a customer's and must be tenants: anything else is refused by name.
func TestUsers_ScopesAreACustomersTenants(t *testing.T) {
	u := natstest.NewUser(t)
	for _, tc := range []struct {
		name string
		user natsconf.User
		want string
	}{
		{"an admin with scopes", natsconf.User{Name: "alice", Role: natsconf.RoleAdmin, Nkey: u.Public, Scopes: []string{contosoSub}}, "only a customer takes scopes"},
		{"a scope that is no tenant", natsconf.User{Name: "contoso", Role: natsconf.RoleCustomer, Nkey: u.Public, Scopes: []string{"/providers/x"}}, `scope "/providers/x"`},
		{"a resource as a scope", natsconf.User{Name: "contoso", Role: natsconf.RoleCustomer, Nkey: u.Public, Scopes: []string{fabrikamRG + "/providers/p/c/c1"}}, "is not /subscriptions/<id>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := natsconf.NkeyUsers([]natsconf.User{tc.user})
			if !errors.Is(err, natsconf.ErrInvalidUser) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want %q", err, tc.want)
			}
		})
	}
}

// A rendered file gives a customer with scopes a permission set of its own, confined to its
// tenants' subscriptions, and the role's set to a customer without.
func TestRender_CustomerWithScopesHasItsOwnPermissions(t *testing.T) {
	f := natsconf.Files()["single.conf"]
	f.Users = append(f.Users, natsconf.User{Name: "contoso-ops", Role: natsconf.RoleCustomer, Nkey: "$MAINT_CONTOSO_NKEY", Scopes: []string{contosoSub}})
	b, err := natsconf.Render(f)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	for _, want := range []string{"PERMISSIONS_USER_CONTOSO_OPS = {", `"maint.subscription.cmd.0b1f6471-1bf0-4dda-aec3-111122223333.>"`,
		"{ nkey: $MAINT_CONTOSO_NKEY, permissions: $PERMISSIONS_USER_CONTOSO_OPS }", "{ nkey: $MAINT_CUSTOMER_NKEY, permissions: $PERMISSIONS_CUSTOMER }"} {
		if !strings.Contains(conf, want) {
			t.Errorf("rendered file lacks %q", want)
		}
	}
}
