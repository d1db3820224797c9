package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maintsignals/infra/local"
	natsconf "maintsignals/infra/nats"
	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/shared/embedded"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/natsconn/natstest"
	"maintsignals/test/testenv"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// atOnce is how fast a refused connection or a denied command must fail: one round trip, far
// from any timeout.
const atOnce = 2 * time.Second

var tlsListenRE = regexp.MustCompile(`listening on (tls://\S+)`)

// runFast runs maintctl and fails the test when it takes longer than atOnce.
func (c *cli) runFast(args ...string) result {
	c.t.Helper()
	start := time.Now()
	r := c.run(args...)
	d := time.Since(start)
	if d > atOnce {
		c.t.Errorf("maintctl %s took %s, want at most %s", strings.Join(args, " "), d, atOnce)
	}
	c.t.Logf("maintctl %s (%s): %v", strings.Join(args, " "), d.Round(time.Millisecond), r.err)
	return r
}

// errText is everything a failed run said.
func (r result) errText() string {
	s := r.stdout + r.stderr
	if r.err != nil {
		s += r.err.Error()
	}
	return s
}

func TestUp_TLS(t *testing.T) {
	ca := natstest.NewCA(t, "maint-test")
	cert, key := ca.Server(t, "server")
	c := newCLI(t, nil)
	u := startUpInProcess(t, c, 20*time.Second, "up", "--listen", "127.0.0.1:0", "--data", t.TempDir(),
		"--metrics-listen", "", "--tls-cert", cert, "--tls-key", key)
	out := u.out.String()
	m := tlsListenRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("up with TLS does not print a tls:// address:\n%s", out)
	}
	mustContain(t, "up output", out, "TLS: on", "--tlsca")
	c.env["NATS_URL"] = m[1]

	mustContain(t, "pending over TLS", c.ok("pending", "--tlsca", ca.CertFile, testID), "applied Pending")
	c.env[natsconn.EnvCA] = ca.CertFile
	mustContain(t, "get over TLS, CA from $NATS_CA", c.ok("get", testID), "Pending")
	delete(c.env, natsconn.EnvCA)

	r := c.runFast("get", testID)
	if r.err == nil {
		t.Fatal("get over TLS without --tlsca succeeded")
	}
	mustContain(t, "error without --tlsca", r.err.Error(), "not trusted", "--tlsca")

	// Another CA is no better.
	other := natstest.NewCA(t, "other")
	r = c.runFast("get", "--tlsca", other.CertFile, testID)
	if r.err == nil || !strings.Contains(r.err.Error(), "--tlsca") {
		t.Errorf("get with the wrong CA: %v", r.err)
	}
	// A plain nats:// URL does not skip TLS.
	c.env["NATS_URL"] = strings.Replace(m[1], "tls://", "nats://", 1)
	if r := c.runFast("get", testID); r.err == nil {
		t.Error("get with a nats:// URL and no CA succeeded against a TLS-only server")
	}
	if res := u.stop(); res.err != nil {
		t.Fatalf("up after interrupt: %v", res.err)
	}
}

func TestUp_MutualTLS(t *testing.T) {
	ca := natstest.NewCA(t, "maint-test")
	cert, key := ca.Server(t, "server")
	clientCert, clientKey := ca.Client(t, "sre")
	c := newCLI(t, nil)
	u := startUpInProcess(t, c, 20*time.Second, "up", "--listen", "127.0.0.1:0", "--data", t.TempDir(),
		"--metrics-listen", "", "--tls-cert", cert, "--tls-key", key, "--tls-client-ca", ca.CertFile)
	m := tlsListenRE.FindStringSubmatch(u.out.String())
	if m == nil {
		t.Fatalf("no tls:// address:\n%s", u.out)
	}
	mustContain(t, "up output", u.out.String(), "TLS: mutual", "--tlscert")
	c.env["NATS_URL"] = m[1]
	c.env[natsconn.EnvCA] = ca.CertFile

	r := c.runFast("get", testID)
	if r.err == nil {
		t.Fatal("get without a client certificate succeeded against mutual TLS")
	}
	mustContain(t, "error without a client certificate", r.err.Error(), "--tlscert")
	mustContain(t, "pending with a client certificate",
		c.ok("pending", "--tlscert", clientCert, "--tlskey", clientKey, testID), "applied Pending")
}

// upUsers writes a --users file of the given roles, with fresh keys, and returns the keys by
// role.
func upUsers(t *testing.T, roles ...natsconf.Role) (string, map[natsconf.Role]natstest.User) {
	t.Helper()
	keys := map[natsconf.Role]natstest.User{}
	var entries []map[string]string
	for _, r := range roles {
		u := natstest.NewUser(t)
		keys[r] = u
		entries = append(entries, map[string]string{"name": "the-" + string(r), "role": string(r), "nkey": u.Public})
	}
	b, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "users.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, keys
}

// as sets the environment of c to connect as user u of role r.
func (c *cli) as(u natstest.User, r natsconf.Role) {
	c.env[natsconn.EnvNkey] = u.SeedFile
	c.env[natsconn.EnvInboxPrefix] = r.InboxPrefix()
}

func TestUp_Users(t *testing.T) {
	users, keys := upUsers(t, natsconf.RoleAdmin, natsconf.RoleReader)
	data := t.TempDir()
	c := newCLI(t, nil)
	u := startUpInProcess(t, c, 20*time.Second, "up", "--listen", "127.0.0.1:0", "--data", data,
		"--metrics-listen", "", "--tick", "1s", "--users", users)
	out := u.out.String()
	m := listenRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no listen address:\n%s", out)
	}
	mustContain(t, "up output", out, "users: the-admin (admin), the-reader (reader)", "throwaway keys",
		"functions: command, emitter", "--nkey ADMIN.nk --inbox-prefix _INBOX_admin")
	c.env["NATS_URL"] = m[1]

	t.Run("an admin sends a command", func(t *testing.T) {
		c.as(keys[natsconf.RoleAdmin], natsconf.RoleAdmin)
		mustContain(t, "pending as admin", c.ok("pending", "--reason", "secured", testID), "applied Pending")
		mustContain(t, "history as admin", c.ok("history", "-o", "wide", testID), "secured")
	})

	t.Run("a reader reads, and is refused a command at once", func(t *testing.T) {
		c.as(keys[natsconf.RoleReader], natsconf.RoleReader)
		mustContain(t, "get as reader", c.ok("get", testID), "Pending")
		for _, args := range [][]string{{"pending", testID}, {"clear", "--no-wait", testID}} {
			r := c.runFast(args...)
			if r.err == nil {
				t.Fatalf("%v as reader succeeded:\n%s", args, r.stdout)
			}
			if r.code() == 0 || !errors.Is(r.err, natsconn.ErrPermissionDenied) {
				t.Errorf("%v as reader: exit %d, %v; want a permission error", args, r.code(), r.err)
			}
			mustContain(t, "error of "+args[0]+" as reader", r.err.Error(),
				"permission denied: your NATS user may not publish to maint.cmd."+domain.MustKey(testID), "admin role")
		}
		// A reader cannot provision either.
		r := c.runFast("provision")
		if !errors.Is(r.err, natsconn.ErrPermissionDenied) || !strings.Contains(r.err.Error(), "operator role") {
			t.Errorf("provision as reader: %v", r.err)
		}
	})

	t.Run("without the role's inbox prefix, a clear error at once", func(t *testing.T) {
		c.as(keys[natsconf.RoleReader], natsconf.RoleReader)
		delete(c.env, natsconn.EnvInboxPrefix)
		r := c.runFast("get", testID)
		if r.err == nil {
			t.Fatal("get without the inbox prefix succeeded")
		}
		mustContain(t, "error without an inbox prefix", r.err.Error(), "--inbox-prefix", "_INBOX_admin")
	})

	t.Run("unknown or no credentials are refused", func(t *testing.T) {
		stranger := natstest.NewUser(t)
		c.as(stranger, natsconf.RoleAdmin)
		r := c.runFast("get", testID)
		if r.err == nil {
			t.Fatal("an unknown key was let in")
		}
		mustContain(t, "error of an unknown key", r.err.Error(), "refused these credentials", "--nkey")
		delete(c.env, natsconn.EnvNkey)
		delete(c.env, natsconn.EnvInboxPrefix)
		if r := c.runFast("get", testID); r.err == nil || !strings.Contains(r.err.Error(), "--nkey") {
			t.Errorf("get without credentials: %v", r.err)
		}
	})

	// Let the emitter tick under the function role.
	time.Sleep(1500 * time.Millisecond)
	res := u.stop()
	if res.err != nil {
		t.Fatalf("up after interrupt: %v\n%s", res.err, res.stderr)
	}
	if strings.Contains(res.stderr, "permission violation") {
		t.Errorf("up's own connections hit a permission violation:\n%s", res.stderr)
	}
	// up's own keys live in memory only: nothing under --data holds a seed.
	err := filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if regexp.MustCompile(`SU[A-Z2-7]{50,}`).Match(b) {
			t.Errorf("%s holds an nkey seed", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestUp_SecurityFlagsAreChecked(t *testing.T) {
	ca := natstest.NewCA(t, "maint-test")
	cert, key := ca.Server(t, "server")
	write := func(name, content string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	seed := natstest.NewUser(t)
	seedBytes, err := os.ReadFile(seed.SeedFile)
	if err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, nil)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", cert}, "--tls-key"},
		{[]string{"--tls-key", key}, "--tls-cert"},
		{[]string{"--tls-client-ca", ca.CertFile}, "--tls-cert"},
		{[]string{"--tls-cert", key, "--tls-key", key}, "TLS"},
		{[]string{"--tlscert", cert}, "--tlscert is a client flag"},
		{[]string{"--nkey", seed.SeedFile}, "--nkey is a client flag"},
		{[]string{"--users", filepath.Join(t.TempDir(), "missing.json")}, "--users"},
		{[]string{"--users", write("empty.json", "[]")}, "no user"},
		{[]string{"--users", write("typo.json", `[{"name":"a","role":"admin","key":"U"}]`)}, "unknown field"},
		{[]string{"--users", write("role.json", `[{"name":"a","role":"root","nkey":"`+seed.Public+`"}]`)}, "unknown role"},
		{[]string{"--users", write("seed.json", `[{"name":"a","role":"admin","nkey":"`+string(seedBytes)+`"}]`)}, "never the seed"},
		{[]string{"--users", write("own.json", `[{"name":"`+local.OperatorUser+`","role":"admin","nkey":"`+seed.Public+`"}]`)}, "kept for up's own"},
	} {
		args := append([]string{"up", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--metrics-listen", ""}, tc.args...)
		r := c.runFast(args...)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("up %v: %v, want an error about %q", tc.args, r.err, tc.want)
		}
	}
}

// TestFunction_ConnectsWithTLSAndNkey runs `maintctl function command` against a server with
// TLS and the users of infra/nats, as a deployment would, with the nats CLI variables.
func TestFunction_ConnectsWithTLSAndNkey(t *testing.T) {
	ca := natstest.NewCA(t, "maint-test")
	cert, key := ca.Server(t, "server")
	tlsConf, err := embedded.ServerTLS(cert, key, "")
	if err != nil {
		t.Fatal(err)
	}
	op, admin, fn := natstest.NewUser(t), natstest.NewUser(t), natstest.NewUser(t)
	nk, err := natsconf.NkeyUsers([]natsconf.User{
		{Name: "operator", Role: natsconf.RoleOperator, Nkey: op.Public},
		{Name: "admin", Role: natsconf.RoleAdmin, Nkey: admin.Public},
		{Name: "command", Role: natsconf.RoleFunction, Nkey: fn.Public},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := testenv.Server(t, embedded.Config{StoreDir: t.TempDir(), Listen: "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)), TLS: tlsConf, Nkeys: nk})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opConn, err := natsconn.Connect(ctx, natsconn.Options{
		Servers: srv.InProcessURL(), NkeyFile: op.SeedFile, InboxPrefix: natsconf.RoleOperator.InboxPrefix(),
		Extra: []nats.Option{nats.InProcessServer(srv.Server)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer opConn.Close()
	if _, err := provision.Run(ctx, opConn.JS, provision.Config{Tick: time.Minute, Partitions: 2}); err != nil {
		t.Fatalf("provision: %v", err)
	}

	fnCLI := newCLI(t, nil)
	fnCLI.env["NATS_URL"] = srv.URL()
	fnCLI.env[natsconn.EnvCA] = ca.CertFile
	fnCLI.as(fn, natsconf.RoleFunction)
	fctx, fcancel := context.WithCancel(context.Background())
	defer fcancel()
	done := make(chan error, 1)
	var errOut testenv.SyncBuffer
	go func() {
		done <- run(fctx, []string{"function", "command"}, fnCLI.getenv, &testenv.SyncBuffer{}, &errOut)
	}()

	c := newCLI(t, nil)
	c.env["NATS_URL"] = srv.URL()
	c.env[natsconn.EnvCA] = ca.CertFile
	c.as(admin, natsconf.RoleAdmin)
	mustContain(t, "pending", c.ok("pending", "--timeout", "15s", testID), "applied Pending")
	fcancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("function command returned %v\n%s", err, errOut.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("function command did not stop")
	}
	if strings.Contains(errOut.String(), "permission violation") {
		t.Errorf("the function hit a permission violation:\n%s", errOut.String())
	}
}

func TestSignKey_OldVariableIsNamed(t *testing.T) {
	c := newCLI(t, nil)
	c.env["MAINT_NKEY"] = "/some/seed.nk"
	c.env["NATS_URL"] = "nats://127.0.0.1:1"
	r := c.run("get", testID)
	mustContain(t, "warning", r.stderr, "MAINT_SIGN_KEY", "--sign-key")
}

// A customer user confined to its subscription (--users with scopes): maintctl, given its
// scope, lists, reads, replays and watches its own entities; another tenant's entity is "not
// permitted" at once (exit 1), not a timeout.
func TestUp_CustomerConfinedToItsTenant(t *testing.T) {
	admin, cust := natstest.NewUser(t), natstest.NewUser(t)
	const mine, theirs = "/subscriptions/aaaa0000-0000-0000-0000-000000000001", "/subscriptions/bbbb0000-0000-0000-0000-000000000002"
	users := filepath.Join(t.TempDir(), "users.json")
	b, _ := json.Marshal([]map[string]any{
		{"name": "ops", "role": "admin", "nkey": admin.Public},
		{"name": "contoso", "role": "customer", "nkey": cust.Public, "scopes": []string{mine}},
	})
	if err := os.WriteFile(users, b, 0o600); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, nil)
	u := startUpInProcess(t, c, 20*time.Second, "up", "--listen", "127.0.0.1:0", "--data", t.TempDir(),
		"--metrics-listen", "", "--web-listen=", "--tick", "1s", "--users", users)
	m := listenRE.FindStringSubmatch(u.out.String())
	if m == nil {
		t.Fatalf("no listen address:\n%s", u.out.String())
	}
	c.env["NATS_URL"] = m[1]
	id := func(sub, name string) string {
		return sub + "/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/" + name
	}
	c.as(admin, natsconf.RoleAdmin)
	for _, e := range []string{id(mine, "a1"), id(mine, "a2"), id(theirs, "b1")} {
		c.ok("pending", "--reason", "tenants", e)
	}

	c.env[natsconn.EnvNkey] = cust.SeedFile
	c.env[natsconn.EnvInboxPrefix] = natsconf.TenantInboxPrefix("contoso")
	c.env["MAINT_SCOPES"] = mine
	list := c.ok("list", "-o", "name")
	if !strings.Contains(list, "a1") || !strings.Contains(list, "a2") || strings.Contains(list, "b1") {
		t.Errorf("list as the customer:\n%s\nwant its two entities only", list)
	}
	mustContain(t, "get of its own", c.ok("get", id(mine, "a1")), "Pending")
	mustContain(t, "history of its own", c.ok("history", id(mine, "a2")), "Pending")
	if out := c.ok("history", "-o", "json"); strings.Contains(out, "b1") || !strings.Contains(out, "a1") {
		t.Errorf("history of the fleet as the customer:\n%s", out)
	}
	if out := c.ok("watch", "--since", "1h", "--no-follow"); strings.Contains(out, "b1") || !strings.Contains(out, "a2") {
		t.Errorf("watch --since as the customer:\n%s", out)
	}
	c.ok("notices")
	// runFast's short deadline: a refusal, not a timeout.
	r := c.runFast("get", id(theirs, "b1"))
	if r.code() != 1 || r.err == nil || !strings.Contains(r.err.Error(), "not permitted") {
		t.Errorf("get of another tenant's entity: exit %d, %v; want exit 1, not permitted", r.code(), r.err)
	}
	// Without its scope, the server still decides: its own entity reads, another's is refused
	// (the server's permission violation, at once), and so is the whole fleet's list.
	delete(c.env, "MAINT_SCOPES")
	mustContain(t, "get of its own without --scope", c.ok("get", id(mine, "a1")), "Pending")
	if r := c.runFast("get", id(theirs, "b1")); r.code() != 1 || r.err == nil || !strings.Contains(r.err.Error(), "not permitted") || !strings.Contains(r.err.Error(), "permission denied") {
		t.Errorf("get of another tenant's entity without --scope: exit %d, %v; want the server's refusal", r.code(), r.err)
	}
	if r := c.runFast("list"); r.err == nil || !strings.Contains(r.err.Error(), "permission denied") {
		t.Errorf("list without --scope: %v, want a permission error", r.err)
	}
}
