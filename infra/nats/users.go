package natsconf

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// User is one party that connects to NATS: a name, the role it plays and its public nkey.
// The party keeps its seed (the private key); the server only ever sees the public key.
type User struct {
	// Name identifies the party in errors, in the rendered config's comments and in the
	// environment variable DefaultUsers reads its key from: [a-z][a-z0-9_-]*.
	Name string
	Role Role
	// Nkey is the public user nkey ("U..."). In a File it may instead be a reference to an
	// environment variable, "$MAINT_ADMIN_NKEY", which nats-server resolves when it loads the
	// file.
	Nkey string
	// Scopes confine a customer (TenantPermissions): /subscriptions/<id> or
	// /subscriptions/<id>/resourceGroups/<name>. Other roles take none. They open the
	// self-service subscriptions of those tenants to it too (CustomerSubscriptions).
	Scopes []string
}

// ErrInvalidUser is wrapped by every user validation error.
var ErrInvalidUser = errors.New("invalid NATS user")

var (
	nameRe   = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	envRefRe = regexp.MustCompile(`^\$[A-Z_][A-Z0-9_]*$`)
)

// IsEnvRef reports whether an Nkey is a reference to an environment variable.
func IsEnvRef(s string) bool { return envRefRe.MatchString(s) }

// validateUsers checks names, roles and keys, and that no name or key appears twice. With
// allowRefs, an Nkey may be an environment variable reference.
func validateUsers(users []User, allowRefs bool) error {
	if len(users) == 0 {
		return fmt.Errorf("%w: no users", ErrInvalidUser)
	}
	names, keys := map[string]bool{}, map[string]bool{}
	for _, u := range users {
		switch {
		case !nameRe.MatchString(u.Name):
			return fmt.Errorf("%w: name %q: use [a-z][a-z0-9_-]*", ErrInvalidUser, u.Name)
		case names[u.Name]:
			return fmt.Errorf("%w: name %q appears twice", ErrInvalidUser, u.Name)
		case !u.Role.Valid():
			return fmt.Errorf("%w %s: %w %q", ErrInvalidUser, u.Name, ErrUnknownRole, u.Role)
		case keys[u.Nkey]:
			// One key in two roles would get the permissions of whichever the server saw last.
			return fmt.Errorf("%w %s: its nkey belongs to another user too", ErrInvalidUser, u.Name)
		case len(u.Scopes) > 0 && u.Role != RoleCustomer:
			return fmt.Errorf("%w %s: only a customer takes scopes", ErrInvalidUser, u.Name)
		case len(u.Scopes) > 0 && scopesErr(u.Scopes) != nil:
			return fmt.Errorf("%w %s: %w", ErrInvalidUser, u.Name, scopesErr(u.Scopes))
		case allowRefs && IsEnvRef(u.Nkey):
		case !nkeys.IsValidPublicUserKey(u.Nkey):
			return fmt.Errorf("%w %s: %q is not a public user nkey (U...)", ErrInvalidUser, u.Name, u.Nkey)
		}
		names[u.Name], keys[u.Nkey] = true, true
	}
	return nil
}

// NkeyUsers returns the server's users (server.Options.Nkeys, embedded.Config.Nkeys) for
// users, each with the permissions of its role. These are exactly the rules of the rendered
// configuration files.
func NkeyUsers(users []User) ([]*server.NkeyUser, error) {
	if err := validateUsers(users, false); err != nil {
		return nil, err
	}
	out := make([]*server.NkeyUser, 0, len(users))
	for _, u := range users {
		p, err := userPermissions(u)
		if err != nil {
			return nil, err
		}
		out = append(out, &server.NkeyUser{Nkey: u.Nkey, Permissions: p})
	}
	return out, nil
}

// DefaultUsers are the parties of a deployment: one per role, and one per function so that a
// function's key can be revoked alone. Each key comes from the environment variable
// MAINT_<NAME>_NKEY when nats-server loads the file.
func DefaultUsers() []User {
	return []User{
		{Name: "operator", Role: RoleOperator, Nkey: "$MAINT_OPERATOR_NKEY"},
		{Name: "admin", Role: RoleAdmin, Nkey: "$MAINT_ADMIN_NKEY"},
		{Name: "updater", Role: RoleUpdater, Nkey: "$MAINT_UPDATER_NKEY"},
		{Name: "command", Role: RoleFunction, Nkey: "$MAINT_COMMAND_NKEY"},
		{Name: "emitter", Role: RoleFunction, Nkey: "$MAINT_EMITTER_NKEY"},
		{Name: "campaign", Role: RoleCampaign, Nkey: "$MAINT_CAMPAIGN_NKEY"},
		{Name: "reader", Role: RoleReader, Nkey: "$MAINT_READER_NKEY"},
		{Name: "customer", Role: RoleCustomer, Nkey: "$MAINT_CUSTOMER_NKEY"},
	}
}

func scopesErr(scopes []string) error {
	_, err := ParseScopes(scopes)
	return err
}
