package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/spf13/cobra"

	natsconf "maintsignals/infra/nats"
	"maintsignals/infra/registry"
	"maintsignals/shared/domain"
	"maintsignals/shared/embedded"
	"maintsignals/shared/natsconn"
)

// securityFlags are the server-side TLS and users of `up`. Their names differ from the client
// flags (--tlscert, --nkey, ...) that the other verbs use to connect.
type securityFlags struct {
	tlsCert, tlsKey, tlsClientCA string
	users                        string
}

func addSecurityFlags(c *cobra.Command, f *securityFlags) {
	fl := c.Flags()
	fl.StringVar(&f.tlsCert, "tls-cert", "", "server certificate (PEM) for the NATS listener: clients must then use TLS (tls://) and trust its CA (--tlsca)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "key (PEM) of --tls-cert")
	fl.StringVar(&f.tlsClientCA, "tls-client-ca", "", "CA certificates (PEM) that sign client certificates: mutual TLS, clients need --tlscert/--tlskey (needs --tls-cert)")
	fl.StringVar(&f.users, "users", "", `JSON file of the only NATS users accepted, each with its role's permissions: [{"name":"alice","role":"admin","nkey":"U…"}] (roles: operator, admin, updater, function, reader)`)
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

// Names of the users `up` adds for its own connections when --users is given, one for
// provisioning and one per role the functions play (maintctl-up-<role>). Their keys are made
// at each start and kept in memory only.
const (
	upUserPrefix   = "maintctl-up-"
	upOperatorUser = upUserPrefix + "operator"
	upFunctionUser = upUserPrefix + "function"
)

// upRoleUser is the name of up's own user of a role.
func upRoleUser(r natsconf.Role) string { return upUserPrefix + string(r) }

// functionRoles are the roles the registry's functions play, each once, in order.
func functionRoles() []natsconf.Role {
	var out []natsconf.Role
	for _, f := range registry.Functions() {
		if r := natsconf.Role(f.Role); !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// upSecurity is what the security flags of `up` amount to; the zero value is no TLS and no
// authentication.
type upSecurity struct {
	tls    *tls.Config
	mutual bool
	// users are the users of --users; nkeys every user the server accepts, up's own included.
	users []natsconf.User
	nkeys []*server.NkeyUser
	// operator provisions and roles run the functions, one key per role they play: up's own
	// throwaway keys, nil without --users.
	operator nkeys.KeyPair
	roles    map[natsconf.Role]nkeys.KeyPair
}

func (s *upSecurity) enabled() bool { return s.tls != nil || s.nkeys != nil }

// load reads the TLS files and the users file of the flags.
func (f securityFlags) load() (*upSecurity, error) {
	sec := &upSecurity{}
	switch {
	case f.tlsCert == "" && f.tlsKey == "" && f.tlsClientCA != "":
		return nil, errors.New("--tls-client-ca needs --tls-cert and --tls-key: mutual TLS is TLS first")
	case (f.tlsCert == "") != (f.tlsKey == ""):
		return nil, errors.New("--tls-cert and --tls-key go together: give both, or neither")
	case f.tlsCert != "":
		c, err := embedded.ServerTLS(f.tlsCert, f.tlsKey, f.tlsClientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key/--tls-client-ca: %w", err)
		}
		sec.tls, sec.mutual = c, f.tlsClientCA != ""
	}
	if f.users == "" {
		return sec, nil
	}
	users, err := readUsers(f.users)
	if err != nil {
		return nil, err
	}
	sec.users = users
	all := append([]natsconf.User(nil), users...)
	sec.roles = map[natsconf.Role]nkeys.KeyPair{}
	for _, r := range append([]natsconf.Role{natsconf.RoleOperator}, functionRoles()...) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, fmt.Errorf("create a key for %s: %w", upRoleUser(r), err)
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("create a key for %s: %w", upRoleUser(r), err)
		}
		if r == natsconf.RoleOperator {
			sec.operator = kp
		} else {
			sec.roles[r] = kp
		}
		all = append(all, natsconf.User{Name: upRoleUser(r), Role: r, Nkey: pub})
	}
	if sec.nkeys, err = natsconf.NkeyUsers(all); err != nil {
		return nil, fmt.Errorf("--users %s: %w", f.users, err)
	}
	return sec, nil
}

// userJSON is one entry of the --users file.
type userJSON struct {
	Name string        `json:"name"`
	Role natsconf.Role `json:"role"`
	Nkey string        `json:"nkey"`
}

// readUsers reads a --users file: the users with their public keys (never a seed).
func readUsers(path string) ([]natsconf.User, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--users: %w", err)
	}
	var entries []userJSON
	if err := domain.DecodeKnown(b, &entries); err != nil {
		return nil, fmt.Errorf(`--users %s: %w (want [{"name":"alice","role":"admin","nkey":"U…"}])`, path, err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("--users %s lists no user", path)
	}
	users := make([]natsconf.User, len(entries))
	for i, e := range entries {
		switch {
		case strings.HasPrefix(e.Name, upUserPrefix):
			return nil, fmt.Errorf("--users %s: the name %q is kept for up's own connections: use another", path, e.Name)
		case strings.HasPrefix(e.Nkey, "S"):
			return nil, fmt.Errorf("--users %s: user %q: nkey must be the public key (U…), never the seed: give the seed only to the user, and rotate this one", path, e.Name)
		}
		users[i] = natsconf.User(e)
	}
	return users, nil
}

// describe says, for people, how the server is secured.
func (s *upSecurity) describe() []string {
	var out []string
	switch {
	case s.mutual:
		out = append(out, "TLS: mutual (clients need --tlsca and a client certificate signed by --tls-client-ca: --tlscert, --tlskey)")
	case s.tls != nil:
		out = append(out, "TLS: on (clients need --tlsca with the CA of --tls-cert)")
	}
	if s.nkeys != nil {
		names := make([]string, len(s.users))
		for i, u := range s.users {
			names[i] = fmt.Sprintf("%s (%s)", u.Name, u.Role)
		}
		own := []string{upOperatorUser}
		for _, r := range functionRoles() {
			own = append(own, upRoleUser(r))
		}
		out = append(out, fmt.Sprintf("users: %s; up's own connections use throwaway keys (%s)",
			strings.Join(names, ", "), strings.Join(own, ", ")))
	}
	return out
}

// clientHint is what a client adds to its command line to reach this server.
func (s *upSecurity) clientHint() string {
	var h string
	if s.tls != nil {
		h += " --tlsca CA.pem"
	}
	if s.mutual {
		h += " --tlscert CLIENT.crt --tlskey CLIENT.key"
	}
	if s.nkeys != nil {
		h += " --nkey ADMIN.nk --inbox-prefix " + natsconf.RoleAdmin.InboxPrefix()
	}
	return h
}

// warnExposure warns when NATS listens beyond loopback without TLS or without authentication.
func (a *app) warnExposure(s *upSecurity, listen string) {
	switch {
	case s.tls == nil && s.nkeys == nil:
		a.log.Warn("NATS listens beyond loopback without authentication or TLS: anyone who reaches it may send commands (see --users and --tls-cert)", "listen", listen)
	case s.nkeys == nil:
		a.log.Warn("NATS listens beyond loopback without authentication: anyone who reaches it may send commands (see --users)", "listen", listen)
	case s.tls == nil:
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
