package natsconf_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	natsconf "maintsignals/infra/nats"
	"maintsignals/infra/nats/rolestest"
	"maintsignals/infra/provision"
	"maintsignals/shared/embedded"
	"maintsignals/shared/natsconn"
	"maintsignals/test/testenv"
)

// securedServer starts an embedded server with the production users of DefaultUsers (fresh
// keys) and connects every party in-process with its seed file and its role's inbox prefix.
func securedServer(t *testing.T) map[string]*rolestest.Party {
	t.Helper()
	users, seeds := rolestest.NewUsers(t)
	nkeys, err := natsconf.NkeyUsers(users)
	if err != nil {
		t.Fatal(err)
	}
	s := testenv.Server(t, embedded.Config{StoreDir: t.TempDir(), Nkeys: nkeys})
	return rolestest.Connect(t, users, seeds, natsconn.Options{
		Servers: s.InProcessURL(),
		Extra:   []nats.Option{nats.InProcessServer(s.Server)},
	})
}

// TestRoles runs the whole product under the production permissions on one server: every
// allowed action of each role works with no permission violation, and every denied one fails
// at once (the table: rolestest.Check).
func TestRoles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the functions for a few seconds")
	}
	rolestest.Check(t, securedServer(t), rolestest.Options{Provision: provision.Config{Tick: time.Second}, RunFunctions: true})
}
