package embedded_test

import (
	"context"
	"crypto/tls"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/embedded"
	"maintsignals/shared/natsconn/natstest"
)

// startTLS starts a listening server with TLS from files; mutual requires client certificates
// signed by the CA.
func startTLS(t *testing.T, mutual bool) (*embedded.Server, *natstest.CA) {
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
	s, err := embedded.Start(embedded.Config{StoreDir: t.TempDir(), Listen: "127.0.0.1:0", TLS: tc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s, ca
}

func TestStart_TLSServesOnlyTLSClients(t *testing.T) {
	s, ca := startTLS(t, false)
	ms, mca := startTLS(t, true)
	clientCert, clientKey := mca.Client(t, "client")
	other := natstest.NewCA(t, "other")
	otherCert, otherKey := other.Client(t, "other")
	tests := []struct {
		name string
		url  string
		opts []nats.Option
		ok   bool
	}{
		{"a TLS client that trusts the CA connects", s.URL(), []nats.Option{nats.RootCAs(ca.CertFile)}, true},
		{"a client that does not trust the CA is refused", s.URL(), nil, false},
		{"a plaintext client is refused", strings.Replace(s.URL(), "tls://", "nats://", 1), nil, false},
		{"mutual TLS: a client with a certificate from the CA connects", ms.URL(), []nats.Option{nats.RootCAs(mca.CertFile), nats.ClientCert(clientCert, clientKey)}, true},
		{"mutual TLS: a client without a certificate is refused", ms.URL(), []nats.Option{nats.RootCAs(mca.CertFile)}, false},
		{"mutual TLS: a client with a certificate from another CA is refused", ms.URL(), []nats.Option{nats.RootCAs(mca.CertFile), nats.ClientCert(otherCert, otherKey)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, err := nats.Connect(tt.url, append(tt.opts, nats.Timeout(2*time.Second))...)
			if !tt.ok {
				if err == nil {
					nc.Close()
					t.Fatal("connected")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			if !nc.TLSRequired() {
				t.Error("not a TLS connection")
			}
			if _, err := nc.TLSConnectionState(); err != nil {
				t.Errorf("TLS state: %v", err)
			}
		})
	}
}

func TestStart_TLSServerRefusesAPlaintextConnectOnTheWire(t *testing.T) {
	// Not the client library declining: the server itself does not serve plaintext.
	s, _ := startTLS(t, false)
	info, reply := natstest.PlaintextPing(t, strings.TrimPrefix(s.URL(), "tls://"))
	if !strings.Contains(info, `"tls_required":true`) {
		t.Fatalf("INFO = %q; want tls_required", info)
	}
	if strings.HasPrefix(reply, "PONG") {
		t.Fatalf("the server answered a plaintext client: %q", reply)
	}
}

func TestConnect_InProcessNeedsNoTLSOnATLSServer(t *testing.T) {
	// maintctl up's own functions connect in-process: with TLS (even mutual) they need no
	// certificate, and the in-process URL stays nats:// (a tls:// one hangs).
	s, _ := startTLS(t, true)
	if !strings.HasPrefix(s.URL(), "tls://") || !strings.HasPrefix(s.InProcessURL(), "nats://") {
		t.Fatalf("URL %q, in-process URL %q", s.URL(), s.InProcessURL())
	}
	nc, err := s.Connect(nats.Timeout(2 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("JetStream in-process: %v", err)
	}
}

func TestStart_NkeysAuthenticateInProcessConnectionsToo(t *testing.T) {
	u := natstest.NewUser(t)
	s, err := embedded.Start(embedded.Config{StoreDir: t.TempDir(), Nkeys: []*server.NkeyUser{{Nkey: u.Public}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	if nc, err := s.Connect(nats.Timeout(2*time.Second), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("connected without a key")
	}
	opt, err := nats.NkeyOptionFromSeed(u.SeedFile)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := s.Connect(opt)
	if err != nil {
		t.Fatalf("with the key: %v", err)
	}
	nc.Close()
}

func TestStart_RejectsInvalidSecurityConfig(t *testing.T) {
	ca := natstest.NewCA(t, "test")
	cert, key := ca.Server(t, "server")
	good, err := embedded.ServerTLS(cert, key, "")
	if err != nil {
		t.Fatal(err)
	}
	verifyWithoutCAs := good.Clone()
	verifyWithoutCAs.ClientAuth = tls.RequireAndVerifyClientCert
	tests := []struct {
		name string
		cfg  embedded.Config
	}{
		{"no store dir", embedded.Config{}},
		{"TLS without a certificate", embedded.Config{TLS: &tls.Config{}}},
		{"client verification without client CAs", embedded.Config{TLS: verifyWithoutCAs}},
		{"an nkey user without a key", embedded.Config{Nkeys: []*server.NkeyUser{{}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name != "no store dir" {
				tt.cfg.StoreDir = t.TempDir()
			}
			s, err := embedded.Start(tt.cfg)
			if err == nil {
				s.Stop()
			}
			if !errors.Is(err, embedded.ErrInvalidConfig) {
				t.Fatalf("Start = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestServerTLS_RejectsMissingOrBadFiles(t *testing.T) {
	ca := natstest.NewCA(t, "test")
	cert, key := ca.Server(t, "server")
	missing := filepath.Join(t.TempDir(), "missing.pem")
	tests := []struct{ name, cert, key, ca string }{
		{"no key", cert, "", ""},
		{"missing certificate file", missing, key, ""},
		{"key that does not match", cert, cert, ""},
		{"missing client CA file", cert, key, missing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := embedded.ServerTLS(tt.cert, tt.key, tt.ca); !errors.Is(err, embedded.ErrInvalidConfig) {
				t.Fatalf("ServerTLS = %v, want ErrInvalidConfig", err)
			}
		})
	}
}
