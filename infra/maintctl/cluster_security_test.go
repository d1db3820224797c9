package main

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"maintsignals/infra/local"
	natsconf "maintsignals/infra/nats"
	"maintsignals/infra/nats/rolestest"
	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/natsconn/natstest"
)

var routePortRE = regexp.MustCompile(`routes on port (\d+)`)

// writeUsers writes a --users file of users.
func writeUsers(t *testing.T, users []natsconf.User) string {
	t.Helper()
	entries := make([]local.UserEntry, len(users))
	for i, u := range users {
		entries[i] = local.UserEntry(u)
	}
	b, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "users.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUp_ThreeNodeSecuredCluster runs `maintctl up --nodes 3` with mutual TLS and the users of
// infra/nats, as an SRE would, and proves on it what the one-node tests prove: every role's
// allowed actions work and its denied ones fail at once (the table of rolestest.Check, each
// party over mutual TLS with its nkey), a plaintext client is refused, a route connection
// without the cluster's route certificate is refused, and a restart on the same --data keeps
// the records and the security.
func TestUp_ThreeNodeSecuredCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node JetStream cluster twice")
	}
	ca := natstest.NewCA(t, "maint-test")
	cert, key := ca.Server(t, "server")
	clientCert, clientKey := ca.Client(t, "sre")
	users, seeds := rolestest.NewUsers(t)
	data := filepath.Join(t.TempDir(), "data")
	c := newCLI(t, nil)
	args := []string{"up", "--nodes", "3", "--listen", "127.0.0.1:0", "--data", data, "--tick", "1s", "--metrics-listen", "",
		"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", ca.CertFile, "--users", writeUsers(t, users)}
	startUp := func(t *testing.T) (urls string, routePorts []string, u *upRun) {
		t.Helper()
		u = startUpInProcess(t, c.with(t), 40*time.Second, args...)
		out := u.out.String()
		m := natsURLRE.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no NATS_URL:\n%s", out)
		}
		for _, url := range strings.Split(m[1], ",") {
			if !strings.HasPrefix(url, "tls://") {
				t.Errorf("NATS_URL %s: want tls:// URLs", m[1])
			}
		}
		for _, rm := range routePortRE.FindAllStringSubmatch(out, -1) {
			routePorts = append(routePorts, rm[1])
		}
		if len(routePorts) != 3 {
			t.Fatalf("want 3 route ports in:\n%s", out)
		}
		mustContain(t, "up output", out, "TLS: mutual", "users: operator (operator), admin (admin)",
			"routes: mutual TLS", "functions: command, emitter", "--tlscert CLIENT.crt --tlskey CLIENT.key --nkey ADMIN.nk")
		return m[1], routePorts, u
	}
	urls, routePorts, u := startUp(t)
	tlsClient := natsconn.Options{Servers: urls, CAFile: ca.CertFile, CertFile: clientCert, KeyFile: clientKey}

	t.Run("each role's allowed actions work and its denied ones fail", func(t *testing.T) {
		parties := rolestest.Connect(t, users, seeds, tlsClient)
		rolestest.Check(t, parties, rolestest.Options{Provision: provision.Config{Replicas: 3, Tick: time.Second}})
	})

	c.env["NATS_URL"] = urls
	c.env[natsconn.EnvCA] = ca.CertFile
	c.env[natsconn.EnvCert] = clientCert
	c.env[natsconn.EnvKey] = clientKey
	c.as(natstest.User{SeedFile: seeds["admin"]}, natsconf.RoleAdmin)

	t.Run("an admin sends a command with maintctl over mutual TLS", func(t *testing.T) {
		mustContain(t, "pending as admin", c.with(t).ok("pending", "--reason", "secured cluster", testID), "applied Pending")
	})

	t.Run("a reader is refused a command at once", func(t *testing.T) {
		reader := c.with(t, natsconn.EnvNkey, seeds["reader"], natsconn.EnvInboxPrefix, natsconf.RoleReader.InboxPrefix())
		r := reader.runFast("pending", testID)
		if !errors.Is(r.err, natsconn.ErrPermissionDenied) {
			t.Errorf("pending as reader: %v; want a permission error", r.err)
		}
		mustContain(t, "get as reader", reader.ok("get", testID), "Pending")
	})

	t.Run("a plaintext client is refused by every node", func(t *testing.T) {
		for _, url := range strings.Split(urls, ",") {
			// On the wire: the node does not serve plaintext.
			if info, reply := natstest.PlaintextPing(t, strings.TrimPrefix(url, "tls://")); !strings.Contains(info, `"tls_required":true`) || strings.HasPrefix(reply, "PONG") {
				t.Errorf("%s: INFO %q, then %q to a plaintext PING", url, info, reply)
			}
			// With maintctl: a nats:// URL and no TLS files get no answer.
			plain := c.with(t, "NATS_URL", strings.Replace(url, "tls://", "nats://", 1),
				natsconn.EnvCA, "", natsconn.EnvCert, "", natsconn.EnvKey, "")
			if r := plain.runFast("get", testID); r.err == nil {
				t.Errorf("%s: a plaintext client got an answer:\n%s", url, r.stdout)
			}
		}
	})

	t.Run("a client without a client certificate is refused", func(t *testing.T) {
		noCert := c.with(t, natsconn.EnvCert, "", natsconn.EnvKey, "")
		if r := noCert.runFast("get", testID); r.err == nil {
			t.Error("a client without a certificate got an answer")
		}
	})

	t.Run("a route connection without the cluster's route certificate is refused", func(t *testing.T) {
		sre, err := tls.LoadX509KeyPair(clientCert, clientKey)
		if err != nil {
			t.Fatal(err)
		}
		server, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		for _, port := range routePorts {
			addr := net.JoinHostPort("127.0.0.1", port)
			for _, tt := range []struct {
				name string
				tc   *tls.Config
			}{
				{"plaintext", nil},
				{"TLS without a certificate", natstest.NoCertificate()},
				// Certificates that clients or the listener use are no route certificates.
				{"a client certificate of --tls-client-ca", natstest.Presenting(sre)},
				{"the certificate of --tls-cert", natstest.Presenting(server)},
			} {
				line, err := natstest.RouteGreeting(t, addr, tt.tc)
				if err == nil || strings.HasPrefix(line, "INFO") || strings.HasPrefix(line, "PONG") {
					t.Errorf("route port %s, %s: answered %q (%v)", port, tt.name, line, err)
				}
			}
		}
	})

	res := u.stop()
	if res.err != nil {
		t.Fatalf("up after interrupt: %v\n%s", res.err, res.stderr)
	}
	if strings.Contains(res.stderr, "permission violation") {
		t.Errorf("up's own connections hit a permission violation:\n%s", res.stderr)
	}

	t.Run("a restart on the same --data keeps the records and the security", func(t *testing.T) {
		again, _, u := startUp(t)
		if again != urls {
			t.Errorf("restart: NATS_URL %s, want %s", again, urls)
		}
		rec := decodeJSON[recordJSON](t, c.with(t).ok("get", "-o", "json", testID))
		if rec.State != domain.StatePending || rec.Reason != "secured cluster" {
			t.Errorf("after restart: %+v", rec)
		}
		plain := c.with(t, "NATS_URL", strings.Replace(urls, "tls://", "nats://", -1), natsconn.EnvCA, "", natsconn.EnvCert, "", natsconn.EnvKey, "")
		if r := plain.runFast("get", testID); r.err == nil {
			t.Error("after restart, a plaintext client got an answer")
		}
		if res := u.stop(); res.err != nil {
			t.Fatalf("up after interrupt: %v\n%s", res.err, res.stderr)
		}
	})
}
