package local

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	natsconf "maintsignals/infra/nats"
	"maintsignals/infra/registry"
	"maintsignals/shared/domain"
	"maintsignals/shared/embedded"
)

// Names of the users `up` adds for its own connections when --users is given, one for
// provisioning and one per role the functions play (maintctl-up-<role>). Their keys are made
// at each start and kept in memory only.
const (
	UserPrefix   = "maintctl-up-"
	OperatorUser = UserPrefix + "operator"
	FunctionUser = UserPrefix + "function"
)

// RoleUser is the name of up's own user of a role.
func RoleUser(r natsconf.Role) string { return UserPrefix + string(r) }

// functionRoles are the roles the registry's functions play, each once, in order.
func FunctionRoles() []natsconf.Role {
	var out []natsconf.Role
	for _, f := range registry.Functions() {
		if r := natsconf.Role(f.Role); !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// Security is what the security flags of `up` amount to; the zero value is no TLS and no
// authentication.
type Security struct {
	TLS    *tls.Config
	Mutual bool
	// Users are the users of --users; Nkeys every user the server accepts, up's own included.
	Users []natsconf.User
	Nkeys []*server.NkeyUser
	// Operator provisions and Roles run the functions, one key per role they play: up's own
	// throwaway keys, nil without --users.
	Operator nkeys.KeyPair
	Roles    map[natsconf.Role]nkeys.KeyPair
}

// Enabled reports whether the server has TLS or users.
func (s *Security) Enabled() bool { return s.TLS != nil || s.Nkeys != nil }

// SecurityFiles are the files of `up`'s security flags: --tls-cert, --tls-key,
// --tls-client-ca and --users ("": not given).
type SecurityFiles struct {
	TLSCert, TLSKey, TLSClientCA string
	Users                        string
}

// LoadSecurity reads the TLS files and the users file of the flags, and makes up's own keys.
func LoadSecurity(f SecurityFiles) (*Security, error) {
	sec := &Security{}
	switch {
	case f.TLSCert == "" && f.TLSKey == "" && f.TLSClientCA != "":
		return nil, errors.New("--tls-client-ca needs --tls-cert and --tls-key: mutual TLS is TLS first")
	case (f.TLSCert == "") != (f.TLSKey == ""):
		return nil, errors.New("--tls-cert and --tls-key go together: give both, or neither")
	case f.TLSCert != "":
		c, err := embedded.ServerTLS(f.TLSCert, f.TLSKey, f.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key/--tls-client-ca: %w", err)
		}
		sec.TLS, sec.Mutual = c, f.TLSClientCA != ""
	}
	if f.Users == "" {
		return sec, nil
	}
	users, err := readUsers(f.Users)
	if err != nil {
		return nil, err
	}
	sec.Users = users
	all := append([]natsconf.User(nil), users...)
	sec.Roles = map[natsconf.Role]nkeys.KeyPair{}
	for _, r := range append([]natsconf.Role{natsconf.RoleOperator}, FunctionRoles()...) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, fmt.Errorf("create a key for %s: %w", RoleUser(r), err)
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("create a key for %s: %w", RoleUser(r), err)
		}
		if r == natsconf.RoleOperator {
			sec.Operator = kp
		} else {
			sec.Roles[r] = kp
		}
		all = append(all, natsconf.User{Name: RoleUser(r), Role: r, Nkey: pub})
	}
	if sec.Nkeys, err = natsconf.NkeyUsers(all); err != nil {
		return nil, fmt.Errorf("--users %s: %w", f.Users, err)
	}
	return sec, nil
}

// UserEntry is one entry of the --users file (natsconf.User as JSON).
type UserEntry struct {
	Name   string        `json:"name"`
	Role   natsconf.Role `json:"role"`
	Nkey   string        `json:"nkey"`
	Scopes []string      `json:"scopes,omitempty"`
}

// readUsers reads a --users file: the users with their public keys (never a seed).
func readUsers(path string) ([]natsconf.User, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--users: %w", err)
	}
	var entries []UserEntry
	if err := domain.DecodeKnown(b, &entries); err != nil {
		return nil, fmt.Errorf(`--users %s: %w (want [{"name":"alice","role":"admin","nkey":"U…"}])`, path, err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("--users %s lists no user", path)
	}
	users := make([]natsconf.User, len(entries))
	for i, e := range entries {
		switch {
		case strings.HasPrefix(e.Name, UserPrefix):
			return nil, fmt.Errorf("--users %s: the name %q is kept for up's own connections: use another", path, e.Name)
		case strings.HasPrefix(e.Nkey, "S"):
			return nil, fmt.Errorf("--users %s: user %q: nkey must be the public key (U…), never the seed: give the seed only to the user, and rotate this one", path, e.Name)
		}
		users[i] = natsconf.User(e)
	}
	return users, nil
}

// Describe says, for people, how the server is secured.
func (s *Security) Describe() []string {
	var out []string
	switch {
	case s.Mutual:
		out = append(out, "TLS: mutual (clients need --tlsca and a client certificate signed by --tls-client-ca: --tlscert, --tlskey)")
	case s.TLS != nil:
		out = append(out, "TLS: on (clients need --tlsca with the CA of --tls-cert)")
	}
	if s.Nkeys != nil {
		names := make([]string, len(s.Users))
		for i, u := range s.Users {
			names[i] = fmt.Sprintf("%s (%s)", u.Name, u.Role)
		}
		own := []string{OperatorUser}
		for _, r := range FunctionRoles() {
			own = append(own, RoleUser(r))
		}
		out = append(out, fmt.Sprintf("users: %s; up's own connections use throwaway keys (%s)",
			strings.Join(names, ", "), strings.Join(own, ", ")))
	}
	return out
}

// ClientHint is what a client adds to its command line to reach this server.
func (s *Security) ClientHint() string {
	var h string
	if s.TLS != nil {
		h += " --tlsca CA.pem"
	}
	if s.Mutual {
		h += " --tlscert CLIENT.crt --tlskey CLIENT.key"
	}
	if s.Nkeys != nil {
		h += " --nkey ADMIN.nk --inbox-prefix " + natsconf.RoleAdmin.InboxPrefix()
	}
	return h
}
