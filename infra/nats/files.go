package natsconf

import "maintsignals/shared/embedded"

// The checked-in configuration files, by file name (relative to infra/nats). `go run
// ./infra/nats/gen` writes them; TestCheckedInFilesAreGenerated fails when they are stale.
func Files() map[string]File {
	return map[string]File{
		"single.conf":  SingleNode(),
		"cluster.conf": ClusterNode(),
	}
}

// Paths of a deployment, the same on every node.
const (
	tlsCert  = "/etc/nats/tls/server.crt"
	tlsKey   = "/etc/nats/tls/server.key"
	tlsCA    = "/etc/nats/tls/ca.crt"
	storeDir = "/var/lib/nats/jetstream"
)

// SingleNode is one server with JetStream on disk: the streams and the bucket have one replica
// (maintctl provision --replicas 1), so every write is synced to disk before it is
// acknowledged.
func SingleNode() File {
	return File{
		Header: `NATS server for Maintenance Signals: one node (maintctl provision --replicas 1).

Before starting nats-server -c single.conf, set the public nkey of every party (go run
./infra/nats/gen -keys DIR creates a seed file per party and prints these lines; each party
keeps its own seed):
  MAINT_OPERATOR_NKEY  provisioning (maintctl provision)
  MAINT_ADMIN_NKEY     SREs and maintctl admin verbs
  MAINT_UPDATER_NKEY   whatever performs updates and reports their outcome
  MAINT_COMMAND_NKEY   maintctl function command
  MAINT_EMITTER_NKEY   maintctl function emitter (and notices, webhook)
  MAINT_CAMPAIGN_NKEY  maintctl function campaign (it announces campaigns' windows)
  MAINT_READER_NKEY    dashboards and integrators (read only)
  MAINT_CUSTOMER_NKEY  a customer's tooling: its policies and reschedules (signed)
and put the server certificate, its key and the CA under /etc/nats/tls.
Clients connect with tls://HOST:4222, their seed (--nkey FILE) and the CA (--tlsca FILE), and
with the inbox prefix of their role (--inbox-prefix _INBOX_<role>).`,
		ServerName:   "maint-0",
		Listen:       "0.0.0.0:4222",
		Monitor:      "127.0.0.1:8222",
		StoreDir:     storeDir,
		SyncAlways:   true,
		MaxPayload:   1 << 20,
		PingInterval: embedded.PingInterval,
		PingMax:      embedded.PingMax,
		TLS:          TLS{Cert: tlsCert, Key: tlsKey, CA: tlsCA},
		Users:        DefaultUsers(),
	}
}

// ClusterNode is one node of a 3-node JetStream cluster (maintctl provision --replicas 3):
// nodes nats-0, nats-1 and nats-2 (host names, for example the pods of a StatefulSet). Every
// write is acknowledged once a majority of nodes has it, and each node syncs it to disk first:
// a majority in memory is not enough when the nodes lose power together (acknowledged writes
// were lost that way in an independent analysis of NATS 2.12.1).
func ClusterNode() File {
	f := SingleNode()
	f.Header = `NATS server for Maintenance Signals: one node of a 3-node JetStream cluster
(maintctl provision --replicas 3), on hosts nats-0, nats-1 and nats-2.

Each node runs nats-server -c cluster.conf with NATS_SERVER_NAME set to its own stable name
(nats-0, nats-1, nats-2) and the same MAINT_*_NKEY public keys as single.conf describes:
  MAINT_OPERATOR_NKEY MAINT_ADMIN_NKEY MAINT_UPDATER_NKEY
  MAINT_COMMAND_NKEY MAINT_EMITTER_NKEY MAINT_CAMPAIGN_NKEY MAINT_READER_NKEY MAINT_CUSTOMER_NKEY
Node certificates under /etc/nats/tls serve clients and routes: they need the host names in
their subject alternative names and both the serverAuth and clientAuth key usages.
Clients connect with NATS_URL=tls://nats-0:4222,tls://nats-1:4222,tls://nats-2:4222, their
seed (--nkey FILE), the CA (--tlsca FILE) and their role's inbox prefix (--inbox-prefix).`
	f.ServerName = "$NATS_SERVER_NAME"
	f.Cluster = &Cluster{
		Name:   "maint",
		Listen: "0.0.0.0:6222",
		Routes: []string{"nats-route://nats-0:6222", "nats-route://nats-1:6222", "nats-route://nats-2:6222"},
	}
	return f
}
