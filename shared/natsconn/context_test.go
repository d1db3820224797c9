package natsconn_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"maintsignals/shared/natsconn"
	"maintsignals/test/testenv"
)

// natsCLIContext is a context file as the nats CLI writes it (jsm.go natscontext, Save): every
// field, in its order, indented by two spaces, mode 0600.
type natsCLIContext struct {
	Description   string `json:"description"`
	URL           string `json:"url"`
	SocksProxy    string `json:"socks_proxy"`
	Token         string `json:"token"`
	User          string `json:"user"`
	Password      string `json:"password"`
	Creds         string `json:"creds"`
	NKey          string `json:"nkey"`
	Cert          string `json:"cert"`
	Key           string `json:"key"`
	CA            string `json:"ca"`
	NSC           string `json:"nsc"`
	JSDomain      string `json:"jetstream_domain"`
	JSAPIPrefix   string `json:"jetstream_api_prefix"`
	JSEventPrefix string `json:"jetstream_event_prefix"`
	InboxPrefix   string `json:"inbox_prefix"`
	UserJWT       string `json:"user_jwt"`
	ColorScheme   string `json:"color_scheme"`
	TLSFirst      bool   `json:"tls_first"`
}

// saveContext writes a context under config (the nats CLI's configuration directory) and,
// with selectIt, selects it as `nats context select` does.
func saveContext(t *testing.T, config, name string, c natsCLIContext, selectIt bool) {
	t.Helper()
	dir := filepath.Join(config, "context")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if selectIt {
		if err := os.WriteFile(filepath.Join(config, "context.txt"), []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

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
	saveContext(t, filepath.Join(home, ".config", "nats"), "secure", natsCLIContext{
		Description: "the secured test server", URL: s.URL(),
		NKey: copyInto(t, home, u.SeedFile),
		Cert: "~/" + filepath.Base(copyInto(t, home, cert)), Key: "$HOME/" + filepath.Base(copyInto(t, home, key)),
		CA: "${CERTS}/" + filepath.Base(ca.CertFile), InboxPrefix: "_INBOX_test",
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
	saveContext(t, filepath.Join(config, "nats"), "prod", natsCLIContext{URL: "nats://prod:4222"}, false)
	saveContext(t, filepath.Join(config, "nats"), "ngs.js", natsCLIContext{URL: "tls://connect.ngs.global", JSDomain: "hub"}, true)
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
