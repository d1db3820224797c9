package main

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/spf13/cobra"

	"maintsignals/infra/local"
	natsconf "maintsignals/infra/nats"
	"maintsignals/shared/natsconn"
)

// addSecurityFlags adds the server-side TLS and users of `up`. Their names differ from the
// client flags (--tlscert, --nkey, ...) that the other verbs use to connect.
func addSecurityFlags(c *cobra.Command, f *local.SecurityFiles) {
	fl := c.Flags()
	fl.StringVar(&f.TLSCert, "tls-cert", "", "server certificate (PEM) for the NATS listener: clients must then use TLS (tls://) and trust its CA (--tlsca)")
	fl.StringVar(&f.TLSKey, "tls-key", "", "key (PEM) of --tls-cert")
	fl.StringVar(&f.TLSClientCA, "tls-client-ca", "", "CA certificates (PEM) that sign client certificates: mutual TLS, clients need --tlscert/--tlskey (needs --tls-cert)")
	fl.StringVar(&f.Users, "users", "", `JSON file of the only NATS users accepted, each with its role's permissions: [{"name":"alice","role":"admin","nkey":"U…"}] (roles: operator, admin, updater, function, reader)`)
}

// clientFlags are the global flags of the verbs that connect as clients; `up` is a server and
// refuses them, so that --tlscert is not taken for --tls-cert.
var clientFlags = []string{"creds", "nkey", "tlscert", "tlskey", "tlsca", "inbox-prefix", "context"}

// refuseClientFlags fails when a client connection flag was given to a server command.
func refuseClientFlags(cmd *cobra.Command) error {
	for _, name := range clientFlags {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s is a client flag: `%s` runs the server; its TLS is --tls-cert, --tls-key and --tls-client-ca, its users --users", name, cmd.CommandPath())
		}
	}
	return nil
}

// warnExposure warns when NATS listens beyond loopback without TLS or without authentication.
func (a *app) warnExposure(s *local.Security, listen string) {
	switch {
	case s.TLS == nil && s.Nkeys == nil:
		a.log.Warn("NATS listens beyond loopback without authentication or TLS: anyone who reaches it may send commands (see --users and --tls-cert)", "listen", listen)
	case s.Nkeys == nil:
		a.log.Warn("NATS listens beyond loopback without authentication: anyone who reaches it may send commands (see --users)", "listen", listen)
	case s.TLS == nil:
		a.log.Warn("NATS listens beyond loopback without TLS: commands and records cross the network in clear (see --tls-cert)", "listen", listen)
	}
}

// connectInProcess opens one of up's own in-process connections to a server or a cluster
// (provider; never TLS: nothing crosses a wire), as user kp of role when the server has users.
func (a *app) connectInProcess(ctx context.Context, url string, provider nats.InProcessConnProvider, name string, kp nkeys.KeyPair, role natsconf.Role) (*natsconn.Conn, error) {
	o := natsconn.Options{
		Servers: url,
		Name:    name,
		Logger:  a.log,
		Extra:   []nats.Option{nats.InProcessServer(provider)},
	}
	if kp != nil {
		opt, err := natsconn.KeyPair(kp)
		if err != nil {
			return nil, err
		}
		o.Extra = append(o.Extra, opt)
		o.InboxPrefix = role.InboxPrefix()
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return natsconn.Connect(ctx, o)
}
