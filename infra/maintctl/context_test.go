package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsconf "maintsignals/infra/nats"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/natsconn/natstest"
)

// A secured server (TLS, nkey users with roles) reached through a NATS CLI context alone: the
// selected one, one named by --context or $NATS_CONTEXT, with flags and variables on top.
func TestContext_ConnectsToASecuredServerAsTheNATSCLIDoes(t *testing.T) {
	ca := natstest.NewCA(t, "maint-test")
	cert, key := ca.Server(t, "server")
	users, keys := upUsers(t, natsconf.RoleAdmin, natsconf.RoleReader)
	c := newCLI(t, nil)
	u := startUpInProcess(t, c, 20*time.Second, "up", "--listen", "127.0.0.1:0", "--data", t.TempDir(),
		"--metrics-listen", "", "--tls-cert", cert, "--tls-key", key, "--users", users)
	m := tlsListenRE.FindStringSubmatch(u.out.String())
	if m == nil {
		t.Fatalf("no tls:// address:\n%s", u.out)
	}
	home := t.TempDir()
	c.env["HOME"] = home
	natsConfig := filepath.Join(home, ".config", "nats")
	natstest.SaveContext(t, natsConfig, "maint-admin", map[string]any{
		"description": "maintenance signals, as an admin", "url": m[1],
		"nkey": keys[natsconf.RoleAdmin].SeedFile, "ca": ca.CertFile, "inbox_prefix": natsconf.RoleAdmin.InboxPrefix(),
	}, true)
	natstest.SaveContext(t, natsConfig, "maint-reader", map[string]any{
		"url": m[1], "nkey": keys[natsconf.RoleReader].SeedFile, "ca": ca.CertFile, "inbox_prefix": natsconf.RoleReader.InboxPrefix(),
	}, false)

	mustContain(t, "pending through the selected context", c.ok("pending", "--reason", "via context", testID), "applied Pending")
	mustContain(t, "get as the reader, by --context", c.ok("--context", "maint-reader", "get", testID), "Pending", "via context")
	r := c.runFast("clear", "--context", "maint-reader", testID)
	if r.err == nil || !strings.Contains(r.err.Error(), "permission denied") {
		t.Errorf("a reader's context sends a command: %v", r.err)
	}
	rd := c.with(t, natsconn.EnvContext, "maint-reader")
	if r := rd.runFast("clear", testID); r.err == nil {
		t.Error("$NATS_CONTEXT was not used")
	}
	// Flags and variables win over the context: the admin's key on the reader's context sends.
	mustContain(t, "the admin's key over the reader's context", rd.ok("clear", "--nkey", keys[natsconf.RoleAdmin].SeedFile, "--inbox-prefix", "_INBOX_admin", testID), "applied None")
	if r := c.runFast("get", "--server", "nats://127.0.0.1:1", testID); r.err == nil || !strings.Contains(r.err.Error(), "127.0.0.1:1") {
		t.Errorf("--server over the context: %v", r.err)
	}

	r = c.runFast("get", "--context", "staging", testID)
	if r.err == nil || !strings.Contains(r.err.Error(), "known: maint-admin, maint-reader") {
		t.Errorf("an unknown context: %v", r.err)
	}
	natstest.SaveContext(t, natsConfig, "hub", map[string]any{"url": m[1], "jetstream_domain": "hub"}, false)
	if r := c.runFast("get", "--context", "hub", testID); r.err == nil || !strings.Contains(r.err.Error(), "jetstream_domain is not supported") {
		t.Errorf("a context with a JetStream domain: %v", r.err)
	}
	if r := c.run("up", "--context", "maint-admin"); r.err == nil || !strings.Contains(r.err.Error(), "client flag") {
		t.Errorf("up --context: %v", r.err)
	}
}
