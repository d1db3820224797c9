package natsconn_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"maintsignals/shared/embedded"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/natsconn/natstest"
	"maintsignals/test/testenv"
)

var quiet = testenv.Quiet()

func TestNATSOptions_RejectsContradictoryOrMissingSettings(t *testing.T) {
	seed := natstest.NewUser(t).SeedFile
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name string
		o    natsconn.Options
	}{
		{"creds and nkey together", natsconn.Options{CredsFile: seed, NkeyFile: seed}},
		{"certificate without key", natsconn.Options{CertFile: seed}},
		{"key without certificate", natsconn.Options{KeyFile: seed}},
		{"missing nkey file", natsconn.Options{NkeyFile: missing}},
		{"missing creds file", natsconn.Options{CredsFile: missing}},
		{"missing CA file", natsconn.Options{CAFile: missing}},
		{"nkey file that holds no seed", natsconn.Options{NkeyFile: writeFile(t, "not a seed")}},
		{"inbox prefix with a wildcard", natsconn.Options{InboxPrefix: "_INBOX_*"}},
		{"inbox prefix with an empty token", natsconn.Options{InboxPrefix: "_INBOX_a..b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.o.NATSOptions(); !errors.Is(err, natsconn.ErrInvalidOptions) {
				t.Fatalf("NATSOptions() = %v, want ErrInvalidOptions", err)
			}
			if _, err := natsconn.Connect(testenv.Context(t, 5*time.Second), tt.o); !errors.Is(err, natsconn.ErrInvalidOptions) {
				t.Fatalf("Connect() = %v, want ErrInvalidOptions", err)
			}
		})
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFromEnvAndFlags_ReadTheNATSCLINamesAndFlagsWin(t *testing.T) {
	env := map[string]string{
		"NATS_URL": "a:4222,b:4222", "NATS_CREDS": "/c", "NATS_NKEY": "/n", "NATS_CERT": "/cert",
		"NATS_KEY": "/key", "NATS_CA": "/ca", "NATS_INBOX_PREFIX": "_INBOX_admin",
	}
	o := natsconn.FromEnv(func(k string) string { return env[k] })
	want := natsconn.Options{Servers: "a:4222,b:4222", CredsFile: "/c", NkeyFile: "/n", CertFile: "/cert", KeyFile: "/key", CAFile: "/ca", InboxPrefix: "_INBOX_admin"}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("FromEnv = %+v, want %+v", o, want)
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	o.Flags(fs)
	if err := fs.Parse([]string{"--nkey", "/flag.nk", "--tlsca", "/flag-ca"}); err != nil {
		t.Fatal(err)
	}
	if o.NkeyFile != "/flag.nk" || o.CAFile != "/flag-ca" || o.CertFile != "/cert" {
		t.Fatalf("after flags: %+v", o)
	}
}

func TestNormalizeServers_AddsTheSchemeAndDefaults(t *testing.T) {
	tests := map[string]string{
		"":                            natsconn.DefaultServer,
		" , ":                         natsconn.DefaultServer,
		"127.0.0.1:4222":              "nats://127.0.0.1:4222",
		"nats://a:1, b:2 ,tls://c:3 ": "nats://a:1,nats://b:2,tls://c:3",
		"u:p@h:1":                     "nats://u:p@h:1",
	}
	for in, want := range tests {
		if got := natsconn.NormalizeServers(in); got != want {
			t.Errorf("NormalizeServers(%q) = %q, want %q", in, got, want)
		}
	}
}

// startPlain starts a listening server with user/password authentication.
func startPlain(t *testing.T) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true, Username: "maint", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(s.Shutdown)
	return strings.TrimPrefix(s.ClientURL(), "nats://")
}

func TestConnect_UserAndPasswordInTheURL(t *testing.T) {
	hostport := startPlain(t)
	c, err := natsconn.Connect(testenv.Context(t, 5*time.Second), natsconn.Options{Servers: "maint:s3cret@" + hostport, Logger: quiet})
	if err != nil {
		t.Fatalf("right password: %v", err)
	}
	c.Close()
	_, err = natsconn.Connect(testenv.Context(t, 5*time.Second), natsconn.Options{Servers: "maint:wrong@" + hostport, Logger: quiet, Timeout: time.Second})
	if !errors.Is(err, natsconn.ErrConnect) || !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("wrong password: %v, want ErrConnect wrapping an authorization error", err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Errorf("the error shows the password: %v", err)
	}
}

// tlsServer starts a listening server with TLS (mutual when mutual is set) and an nkey user.
func tlsServer(t *testing.T, mutual bool) (*embedded.Server, *natstest.CA, natstest.User) {
	t.Helper()
	ca := natstest.NewCA(t, "test")
	cert, key := ca.Server(t, "server")
	clientCA := ""
	if mutual {
		clientCA = ca.CertFile
	}
	tc, err := embedded.ServerTLS(cert, key, clientCA)
	if err != nil {
		t.Fatal(err)
	}
	u := natstest.NewUser(t)
	s := testenv.Server(t, embedded.Config{StoreDir: t.TempDir(), Listen: "127.0.0.1:0", TLS: tc, Nkeys: []*server.NkeyUser{{Nkey: u.Public}}})
	return s, ca, u
}

func TestConnect_TLS(t *testing.T) {
	s, ca, u := tlsServer(t, false)
	ms, mca, mu := tlsServer(t, true)
	clientCert, clientKey := mca.Client(t, "client")
	stranger := natstest.NewCA(t, "stranger")
	strangerCert, strangerKey := stranger.Client(t, "stranger")
	tests := []struct {
		name string
		o    natsconn.Options
		ok   bool
	}{
		{"TLS with the CA connects", natsconn.Options{Servers: s.URL(), NkeyFile: u.SeedFile, CAFile: ca.CertFile}, true},
		{"a nats:// URL is upgraded to TLS", natsconn.Options{Servers: strings.Replace(s.URL(), "tls://", "nats://", 1), NkeyFile: u.SeedFile, CAFile: ca.CertFile}, true},
		{"without the CA the server is not trusted", natsconn.Options{Servers: s.URL(), NkeyFile: u.SeedFile}, false},
		{"TLS without the nkey is refused", natsconn.Options{Servers: s.URL(), CAFile: ca.CertFile}, false},
		{"mutual TLS with a certificate from the CA connects", natsconn.Options{Servers: ms.URL(), NkeyFile: mu.SeedFile, CAFile: mca.CertFile, CertFile: clientCert, KeyFile: clientKey}, true},
		{"mutual TLS without a certificate is refused", natsconn.Options{Servers: ms.URL(), NkeyFile: mu.SeedFile, CAFile: mca.CertFile}, false},
		{"mutual TLS with a certificate from another CA is refused", natsconn.Options{Servers: ms.URL(), NkeyFile: mu.SeedFile, CAFile: mca.CertFile, CertFile: strangerCert, KeyFile: strangerKey}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Logger, tt.o.Timeout = quiet, 2*time.Second
			c, err := natsconn.Connect(testenv.Context(t, 10*time.Second), tt.o)
			if tt.ok {
				if err != nil {
					t.Fatalf("Connect: %v", err)
				}
				defer c.Close()
				if !c.NC.TLSRequired() {
					t.Error("connection is not TLS")
				}
				if _, err := c.JS.AccountInfo(testenv.Context(t, 5*time.Second)); err != nil {
					t.Errorf("JetStream over TLS: %v", err)
				}
				return
			}
			if !errors.Is(err, natsconn.ErrConnect) {
				t.Fatalf("Connect = %v, want ErrConnect", err)
			}
		})
	}
}

func TestConnect_KeyPairHeldInMemory(t *testing.T) {
	u := natstest.NewUser(t)
	s := testenv.Server(t, embedded.Config{StoreDir: t.TempDir(), Nkeys: []*server.NkeyUser{{Nkey: u.Public}}})
	opt, err := natsconn.KeyPair(u.KeyPair)
	if err != nil {
		t.Fatal(err)
	}
	c, err := natsconn.Connect(testenv.Context(t, 5*time.Second), natsconn.Options{Servers: s.InProcessURL(), Logger: quiet, Extra: []nats.Option{nats.InProcessServer(s.Server), opt}})
	if err != nil {
		t.Fatalf("in-memory key: %v", err)
	}
	c.Close()
}
