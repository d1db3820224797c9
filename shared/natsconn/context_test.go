package natsconn_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"maintsignals/shared/natsconn"
	"maintsignals/shared/natsconn/natstest"
	"maintsignals/test/testenv"
)

// copyInto copies file into dir and returns the new path.
func copyInto(t *testing.T, dir, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, filepath.Base(file))
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestContext_SelectedContextConnectsWithItsTLSAndNkey(t *testing.T) {
	s, ca, u := tlsServer(t, true)
	cert, key := ca.Client(t, "client")
	home := t.TempDir()
	certs := filepath.Join(home, "certs")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		t.Fatal(err)
	}
	copyInto(t, certs, ca.CertFile)
	env := map[string]string{"HOME": home, "CERTS": certs}
	getenv := func(k string) string { return env[k] }
	natstest.SaveContext(t, filepath.Join(home, ".config", "nats"), "secure", map[string]any{
		"description": "the secured test server", "url": s.URL(),
		"nkey": copyInto(t, home, u.SeedFile),
		"cert": "~/" + filepath.Base(copyInto(t, home, cert)), "key": "$HOME/" + filepath.Base(copyInto(t, home, key)),
		"ca": "${CERTS}/" + filepath.Base(ca.CertFile), "inbox_prefix": "_INBOX_test",
	}, true)

	c, err := natsconn.LoadContext("", getenv)
	if err != nil || c == nil || c.Name != "secure" {
		t.Fatalf("selected context: %+v, %v", c, err)
	}
	o := natsconn.Options{Logger: quiet, Timeout: 2 * time.Second}
	if err := c.Fill(&o, getenv); err != nil {
		t.Fatal(err)
	}
	conn, err := natsconn.Connect(testenv.Context(t, 10*time.Second), o)
	if err != nil {
		t.Fatalf("connect with the context: %v (options %+v)", err, o)
	}
	defer conn.Close()
	if !conn.NC.TLSRequired() || !strings.HasPrefix(conn.NC.NewRespInbox(), "_INBOX_test.") {
		t.Errorf("not the context's connection: TLS %t, inbox %s", conn.NC.TLSRequired(), conn.NC.NewRespInbox())
	}
	if _, err := conn.JS.AccountInfo(testenv.Context(t, 5*time.Second)); err != nil {
		t.Errorf("JetStream through the context: %v", err)
	}

	// Flags and variables (already in the options) win over the context.
	o = natsconn.Options{Servers: "nats://elsewhere:4222", CredsFile: "/x.creds", InboxPrefix: "_INBOX_mine"}
	if err := c.Fill(&o, getenv); err != nil {
		t.Fatal(err)
	}
	if o.Servers != "nats://elsewhere:4222" || o.CredsFile != "/x.creds" || o.NkeyFile != "" || o.InboxPrefix != "_INBOX_mine" || o.CAFile != filepath.Join(certs, filepath.Base(ca.CertFile)) {
		t.Errorf("filled %+v", o)
	}
}

func TestContext_NamesAndRefusals(t *testing.T) {
	config := t.TempDir()
	env := map[string]string{"XDG_CONFIG_HOME": config}
	getenv := func(k string) string { return env[k] }
	if c, err := natsconn.LoadContext("", getenv); c != nil || err != nil {
		t.Fatalf("nothing selected: %+v, %v", c, err)
	}
	natstest.SaveContext(t, filepath.Join(config, "nats"), "prod", map[string]any{"url": "nats://prod:4222"}, false)
	natstest.SaveContext(t, filepath.Join(config, "nats"), "ngs.js", map[string]any{"url": "tls://connect.ngs.global", "jetstream_domain": "hub"}, true)
	if got := natsconn.KnownContexts(getenv); strings.Join(got, ",") != "ngs.js,prod" {
		t.Errorf("known %v", got)
	}
	env[natsconn.EnvContext] = "prod"
	if c, err := natsconn.LoadContext("", getenv); err != nil || c.URL != "nats://prod:4222" {
		t.Errorf("$NATS_CONTEXT: %+v, %v", c, err)
	}
	c, err := natsconn.LoadContext("ngs.js", getenv)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Fill(&natsconn.Options{}, getenv); !errors.Is(err, natsconn.ErrContext) || !strings.Contains(err.Error(), "jetstream_domain") {
		t.Errorf("unsupported setting: %v", err)
	}
	if _, err := natsconn.LoadContext("staging", getenv); !errors.Is(err, natsconn.ErrContext) || !strings.Contains(err.Error(), "known: ngs.js, prod") {
		t.Errorf("unknown context: %v", err)
	}
	if _, err := natsconn.LoadContext("../etc", getenv); !errors.Is(err, natsconn.ErrContext) {
		t.Errorf("a path as a name: %v", err)
	}
}
