package natsconf_test

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	natsconf "maintsignals/infra/nats"
	"maintsignals/shared/domain"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/natsconn/natstest"
)

func TestCheckedInFilesAreGenerated(t *testing.T) {
	for name, f := range natsconf.Files() {
		want, err := natsconf.Render(f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		have, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%s: %v (run `go run ./infra/nats/gen`)", name, err)
		}
		if string(have) != string(want) {
			t.Errorf("%s differs from the Go data: run `go run ./infra/nats/gen` from the repository root", name)
		}
	}
}

// deployment is what an operator provides for a configuration file: the parties' public keys
// in the environment, certificates and a store at the file's paths (here, temporary ones).
type deployment struct {
	seeds map[string]string // user name -> seed file
	ca    *natstest.CA
}

// loadFile renders f for this machine (temporary paths, free ports, test certificates),
// sets the environment it refers to, and loads it the way nats-server -c does.
func loadFile(t *testing.T, f natsconf.File) (*server.Options, deployment) {
	t.Helper()
	d := deployment{seeds: map[string]string{}, ca: natstest.NewCA(t, "deploy")}
	for _, u := range f.Users {
		nu := natstest.NewUser(t)
		t.Setenv(strings.TrimPrefix(u.Nkey, "$"), nu.Public)
		d.seeds[u.Name] = nu.SeedFile
	}
	t.Setenv("NATS_SERVER_NAME", "nats-0")
	f.TLS.Cert, f.TLS.Key = d.ca.Server(t, "server")
	f.TLS.CA = d.ca.CertFile
	f.StoreDir = t.TempDir()
	f.Listen, f.Monitor = "127.0.0.1:-1", ""
	if f.Cluster != nil {
		f.Cluster.Listen = "127.0.0.1:-1"
	}
	b, err := natsconf.Render(f)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(p)
	if err != nil {
		t.Fatalf("nats-server does not load the rendered file: %v", err)
	}
	return opts, d
}

func TestConfigFiles_LoadWithExactlyTheGoRules(t *testing.T) {
	for name, f := range natsconf.Files() {
		t.Run(name, func(t *testing.T) {
			opts, _ := loadFile(t, f)
			// The keys came from the environment: build the Go rules for the same keys.
			users := make([]natsconf.User, len(f.Users))
			for i, u := range f.Users {
				users[i] = natsconf.User{Name: u.Name, Role: u.Role, Nkey: os.Getenv(strings.TrimPrefix(u.Nkey, "$"))}
			}
			want, err := natsconf.NkeyUsers(users)
			if err != nil {
				t.Fatal(err)
			}
			if len(opts.Nkeys) != len(want) {
				t.Fatalf("%d users loaded, want %d", len(opts.Nkeys), len(want))
			}
			for i, w := range want {
				got := opts.Nkeys[i]
				if got.Nkey != w.Nkey || !reflect.DeepEqual(got.Permissions, w.Permissions) {
					t.Errorf("user %s (%s):\nloaded %+v %+v\nGo     %+v %+v", users[i].Name, users[i].Role,
						got.Permissions.Publish, got.Permissions.Subscribe, w.Permissions.Publish, w.Permissions.Subscribe)
				}
			}
			if opts.TLSConfig == nil || opts.TLSVerify != f.TLS.VerifyClients {
				t.Errorf("TLS %v, verify %v", opts.TLSConfig != nil, opts.TLSVerify)
			}
			if !opts.JetStream || opts.SyncAlways != f.SyncAlways || opts.MaxPayload != int32(f.MaxPayload) {
				t.Errorf("jetstream %v, sync always %v, max payload %d", opts.JetStream, opts.SyncAlways, opts.MaxPayload)
			}
			if f.Cluster != nil && (opts.Cluster.Name != f.Cluster.Name || len(opts.Routes) != len(f.Cluster.Routes) || opts.Cluster.TLSConfig == nil || opts.Cluster.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert) {
				t.Errorf("cluster %+v, %d routes", opts.Cluster, len(opts.Routes))
			}
		})
	}
}

func TestSingleNodeFile_ServesTLSClientsWithTheirKeys(t *testing.T) {
	opts, d := loadFile(t, natsconf.SingleNode())
	opts.NoSigs, opts.NoLog = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server from single.conf not ready")
	}
	t.Cleanup(s.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	connect := func(user string, role natsconf.Role, ca string) (*natsconn.Conn, error) {
		return natsconn.Connect(ctx, natsconn.Options{Servers: s.ClientURL(), NkeyFile: d.seeds[user], CAFile: ca, InboxPrefix: role.InboxPrefix(), Logger: quiet, Timeout: 2 * time.Second})
	}
	admin, err := connect("admin", natsconf.RoleAdmin, d.ca.CertFile)
	if err != nil {
		t.Fatalf("admin over TLS: %v", err)
	}
	defer admin.Close()
	if _, err := admin.JS.AccountInfo(ctx); err != nil {
		t.Fatalf("admin account info: %v", err)
	}
	reader, err := connect("reader", natsconf.RoleReader, d.ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if _, err := reader.Publish(ctx, domain.CommandSubject("k"), nil); !errors.Is(err, natsconn.ErrPermissionDenied) {
		t.Errorf("reader publishing a command: %v, want ErrPermissionDenied", err)
	}
	if _, err := connect("admin", natsconf.RoleAdmin, ""); !errors.Is(err, natsconn.ErrConnect) {
		t.Errorf("admin without the CA: %v, want ErrConnect", err)
	}
	nc, err := nats.Connect(strings.Replace(s.ClientURL(), "tls://", "nats://", 1), nats.Timeout(2*time.Second))
	if err == nil {
		nc.Close()
		t.Error("a plaintext client without a key connected")
	}
}

func TestRender_RejectsInvalidFiles(t *testing.T) {
	tests := []struct {
		name   string
		change func(*natsconf.File)
	}{
		{"no TLS", func(f *natsconf.File) { f.TLS = natsconf.TLS{} }},
		{"mutual TLS without a CA", func(f *natsconf.File) { f.TLS.CA, f.TLS.VerifyClients = "", true }},
		{"a cluster without a CA", func(f *natsconf.File) { *f = natsconf.ClusterNode(); f.TLS.CA = "" }},
		{"a cluster without routes", func(f *natsconf.File) { *f = natsconf.ClusterNode(); f.Cluster.Routes = nil }},
		{"no store dir", func(f *natsconf.File) { f.StoreDir = "" }},
		{"no server name", func(f *natsconf.File) { f.ServerName = "" }},
		{"a listen address without a port", func(f *natsconf.File) { f.Listen = "0.0.0.0" }},
		{"a control character", func(f *natsconf.File) { f.StoreDir = "/data\n}" }},
		{"no users", func(f *natsconf.File) { f.Users = nil }},
		{"a key that is neither a key nor a reference", func(f *natsconf.File) { f.Users[0].Nkey = "$lower" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := natsconf.SingleNode()
			tt.change(&f)
			if _, err := natsconf.Render(f); !errors.Is(err, natsconf.ErrInvalidFile) {
				t.Fatalf("Render = %v, want ErrInvalidFile", err)
			}
		})
	}
}
