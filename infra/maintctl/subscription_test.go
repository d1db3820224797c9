package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"maintsignals/functions/subscriptions"
	natsconf "maintsignals/infra/nats"
	"maintsignals/shared/domain"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/natsconn/natstest"
	"maintsignals/test/testenv"
)

// hookReceiver is an HTTPS endpoint that keeps the bodies and headers it gets; its CA is in a
// PEM file, for SSL_CERT_FILE.
type hookReceiver struct {
	URL, CAFile string
	mu          sync.Mutex
	got         []http.Header
	bodies      [][]byte
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	h := &hookReceiver{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.got, h.bodies = append(h.got, r.Header.Clone()), append(h.bodies, b)
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	h.URL = srv.URL + "/hook?token=s3cr3t"
	h.CAFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(h.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

// verified returns the subjects (ce-subject) of the deliveries that the secret verifies; it
// fails the test on one it does not.
func (h *hookReceiver) verified(t *testing.T, secret string) []string {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for i, hd := range h.got {
		if err := wh.Verify(h.bodies[i], hd); err != nil {
			t.Fatalf("a delivery the printed secret does not verify: %v", err)
		}
		out = append(out, hd.Get("ce-subject"))
	}
	return out
}

var secretRE = regexp.MustCompile(`whsec_[A-Za-z0-9+/=]+`)

// The self-service subscriptions as customers and an admin use them through `maintctl up` with
// users and signed commands: a customer creates one in its scope and gets its secret, shown
// once, which verifies the deliveries of its entities' events; outside its signer's scopes
// the command is Unauthorized; outside its NATS scopes, and for another tenant's, NATS refuses
// it at once (exit 1, not permitted); each lists its own, the admin every one.
func TestSubscription_CustomersThroughUp(t *testing.T) {
	const (
		contoso  = "/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333"
		fabrikam = "/subscriptions/0b1f6471-1bf0-4dda-aec3-444455556666/resourceGroups/rg-f"
	)
	recv := newHookReceiver(t)
	t.Setenv("SSL_CERT_FILE", recv.CAFile)
	dir := t.TempDir()
	keys := map[string]natstest.User{}
	var users, signers []map[string]any
	for _, p := range []struct {
		name, role, natsScope, signScope string
	}{{"the-admin", "admin", "", ""}, {"contoso", "customer", contoso, contoso + "/resourceGroups/rg-1"}, {"fabrikam", "customer", fabrikam, fabrikam}} {
		keys[p.name] = natstest.NewUser(t)
		u := map[string]any{"name": p.name, "role": p.role, "nkey": keys[p.name].Public}
		s := map[string]any{"name": p.name, "publicKey": keys[p.name].Public, "roles": []string{p.role}}
		if p.natsScope != "" {
			u["scopes"], s["scopes"] = []string{p.natsScope}, []string{p.signScope}
		}
		users, signers = append(users, u), append(signers, s)
	}
	write := func(name string, v any) string {
		b, _ := json.Marshal(v)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c := newCLI(t, nil)
	up := startUpInProcess(t, c, 30*time.Second, "up", "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "data"), "--metrics-listen", "",
		"--users", write("users.json", users), "--signers", write("signers.json", signers), "--require-signatures", "--allow-private-endpoints")
	m := listenRE.FindStringSubmatch(up.out.String())
	if m == nil {
		t.Fatalf("no listen address:\n%s", up.out)
	}
	c.env["NATS_URL"] = m[1]
	as := func(name string, role natsconf.Role) *cli {
		cc := c.with(t)
		cc.as(keys[name], role)
		if role == natsconf.RoleCustomer {
			cc.env[natsconn.EnvInboxPrefix] = natsconf.TenantInboxPrefix(name)
		}
		cc.env[envSignKey] = keys[name].SeedFile
		return cc
	}
	admin, cont, fab := as("the-admin", natsconf.RoleAdmin), as("contoso", natsconf.RoleCustomer), as("fabrikam", natsconf.RoleCustomer)

	out := cont.ok("subscription", "create", "crm", "--url", recv.URL, "--scope", contoso+"/resourceGroups/rg-1", "--timeout", "20s")
	mustContain(t, "create", out, "applied create of subscription crm", "secret ", "never shown again")
	secret := secretRE.FindString(out)
	fab.ok("subscription", "create", "crm", "--url", recv.URL, "--scope", fabrikam, "--timeout", "20s")

	r := cont.run("subscription", "create", "ops", "--url", recv.URL, "--scope", contoso+"/resourceGroups/rg-2")
	if r.code() != exitRejected || !strings.Contains(r.stdout, "Unauthorized") || secretRE.MatchString(r.stdout) {
		t.Errorf("outside its signer's scopes: exit %d\n%s", r.code(), r.stdout)
	}
	for what, args := range map[string][]string{
		"create in another tenant": {"subscription", "create", "x", "--url", recv.URL, "--scope", fabrikam},
		"delete another tenant's":  {"subscription", "delete", "crm", "--scope", fabrikam},
	} {
		r := cont.runFast(args...)
		if r.code() != exitError || !errors.Is(r.err, natsconn.ErrPermissionDenied) {
			t.Errorf("contoso: %s: exit %d, %v; want not permitted", what, r.code(), r.err)
		}
	}
	for who, cl := range map[string]*cli{"contoso": cont, "fabrikam": fab, "admin": admin} {
		list := cl.ok("subscription", "list", "-o", "json")
		var got []subscriptionJSON
		if err := json.Unmarshal([]byte(list), &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]int{"contoso": 1, "fabrikam": 1, "admin": 2}[who]
		if len(got) != want || secretRE.MatchString(list) || strings.Contains(list, "s3cr3t") {
			t.Errorf("%s lists %d subscriptions (want %d), or a secret or the endpoint's query:\n%s", who, len(got), want, list)
		}
	}

	admin.ok("pending", contoso+"/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1")
	admin.ok("pending", contoso+"/resourceGroups/rg-2/providers/Microsoft.RedHatOpenShift/openShiftClusters/c2")
	testenv.Eventually(t, 10*time.Second, "the delivery to contoso's subscription", func() bool { return len(recv.verified(t, secret)) >= 1 })
	time.Sleep(500 * time.Millisecond)
	if got := recv.verified(t, secret); len(got) != 1 || !strings.HasSuffix(got[0], "/c1") {
		t.Errorf("delivered %v: want c1's event only (c2 is outside its scope, fabrikam's subscription has another secret)", got)
	}
	mustContain(t, "delete", cont.ok("subscription", "delete", "crm"), "applied delete of subscription crm")
	mustContain(t, "list after delete", cont.ok("subscription", "list"), "no subscription")
	res := up.stop()
	if res.err != nil {
		t.Errorf("up: %v", res.err)
	}
	if strings.Contains(res.stderr, secret) || strings.Contains(res.stderr, "s3cr3t") {
		t.Error("up's logs show the secret or the endpoint's query")
	}
}

// startSubscriptionsFunction runs the subscriptions function in the test process.
func startSubscriptionsFunction(t *testing.T, s *stack) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- subscriptions.Run(ctx, s.JS, subscriptions.Config{Log: testenv.Quiet()}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("subscriptions function: %v", err)
		}
	})
}

// The CLI of the subscriptions: the secret is shown once, by create (also in its JSON), never by
// list nor on a refusal; --secret-file gives one (never printed); the filters are checked
// before anything is sent; a second create of a name is refused; delete finds the name, asks
// for --scope when it is in two scopes, and says when there is none.
func TestSubscription_CreateListDelete(t *testing.T) {
	s := startStack(t, stackOpts{noFunction: true})
	startSubscriptionsFunction(t, s)
	c := newCLI(t, s)
	const rg1, rg2 = "/subscriptions/0b1f/resourceGroups/rg-1", "/subscriptions/0b1f/resourceGroups/rg-2"

	out := c.ok("subscription", "create", "crm", "--url", "https://hooks.example.com/in?token=s3cr3t", "--scope", rg1, "--states", "Pending,Planned", "--in-window", "true")
	secret := secretRE.FindString(out)
	if secret == "" || strings.Count(out, secret) != 1 {
		t.Fatalf("create shows the secret %d times:\n%s", strings.Count(out, secret), out)
	}
	var res subscriptionResultJSON
	if err := json.Unmarshal([]byte(c.ok("subscription", "create", "crm", "--url", "https://hooks.example.com/in", "--scope", rg2, "-o", "json")), &res); err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Outcome != domain.OutcomeApplied || !strings.HasPrefix(res.Secret, "whsec_") || res.Command.Secret != "" || res.Outcome.Delivery == "" {
		t.Errorf("create -o json: %+v", res)
	}
	file := filepath.Join(t.TempDir(), "pager.secret")
	if err := os.WriteFile(file, []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := c.ok("subscription", "create", "pager", "--url", "https://pager.example.com/in", "--scope", rg1, "--secret-file", file); secretRE.MatchString(out) {
		t.Errorf("create --secret-file prints the secret:\n%s", out)
	}
	badSecret := filepath.Join(t.TempDir(), "bad.secret")
	if err := os.WriteFile(badSecret, []byte("hunter2"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := c.run("subscription", "create", "pager", "--url", "https://pager.example.com/in", "--scope", rg1)
	if r.code() != exitRejected || !strings.Contains(r.stdout, "RequestNotAllowed (name)") || secretRE.MatchString(r.stdout) {
		t.Errorf("second create of a name: exit %d\n%s", r.code(), r.stdout)
	}

	list := c.ok("subscription", "list")
	mustContain(t, "list", list, "NAME", "crm", "pager", rg1, rg2, "https://hooks.example.com/in?…", "Pending,Planned", "sre-test")
	wide := c.ok("subscription", "list", "-o", "wide")
	mustContain(t, "list -o wide", wide, "DELIVERY", res.Outcome.Delivery)
	for name, text := range map[string]string{"list": list, "wide": wide, "json": c.ok("subscription", "list", "-o", "json")} {
		if secretRE.MatchString(text) || strings.Contains(text, "s3cr3t") {
			t.Errorf("%s shows a secret or an endpoint's query:\n%s", name, text)
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"subscription", "create", "x", "--url", "https://h.example", "--scope", rg1, "--states", "pending"}, `state "pending"`},
		{[]string{"subscription", "create", "x", "--url", "https://h.example", "--scope", rg1, "--in-window", "maybe"}, "--in-window"},
		{[]string{"subscription", "create", "x", "--url", "http://h.example", "--scope", rg1}, "must be https"},
		{[]string{"subscription", "create", "x", "--url", "https://h.example"}, `"scope" not set`},
		{[]string{"subscription", "create", "a.b", "--url", "https://h.example", "--scope", rg1}, "NAME"},
		{[]string{"subscription", "create", "x", "--url", "https://h.example", "--scope", rg1, "--secret-file", file + ".missing"}, "--secret-file"},
		{[]string{"subscription", "create", "x", "--url", "https://h.example", "--scope", rg1, "--secret-file", badSecret}, "--secret-file"},
		{[]string{"subscription", "create", "x", "--url", "https://h.example", "--scope", rg1, "--timeout", "0s"}, "--timeout"},
		{[]string{"subscription", "delete", "crm", "--scope", "/subscriptions"}, "--scope"},
		{[]string{"subscription", "delete", "crm"}, "give --scope"},
		{[]string{"subscription", "delete", "nope"}, "no subscription nope"},
	} {
		if r := c.run(tc.args...); r.code() != exitError || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("%v: exit %d, %v; want %q", tc.args, r.code(), r.err, tc.want)
		}
	}
	mustContain(t, "delete --scope", c.ok("subscription", "delete", "crm", "--scope", rg2), "applied delete of subscription crm (scope "+rg2)
	mustContain(t, "delete", c.ok("subscription", "delete", "crm"), "applied delete of subscription crm (scope "+rg1)
	r = c.run("subscription", "delete", "crm", "--scope", rg1)
	if r.code() != exitRejected || !strings.Contains(r.stdout, "InvalidParameter (name)") {
		t.Errorf("delete of a deleted name: exit %d\n%s", r.code(), r.stdout)
	}
	if list := c.ok("subscription", "list", "-o", "name"); strings.TrimSpace(list) != "pager" {
		t.Errorf("list -o name after the deletes: %q", list)
	}
}

// With no subscriptions function, create prints the secret beside the exit 3, since the stored
// command may still take effect.
func TestSubscription_NoOutcomeStillShowsTheSecret(t *testing.T) {
	s := startStack(t, stackOpts{noFunction: true})
	c := newCLI(t, s)
	r := c.run("subscription", "create", "crm", "--url", "https://hooks.example.com/in", "--scope", "/subscriptions/0b1f", "--timeout", "1s")
	if r.code() != exitNoResult || !secretRE.MatchString(r.stdout) || !strings.Contains(r.err.Error(), "subscriptions function") {
		t.Errorf("exit %d, %v\n%s", r.code(), r.err, r.stdout)
	}
}
