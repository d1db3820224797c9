package natsconf_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	natsconf "maintsignals/infra/nats"
	"maintsignals/shared/natsconn/natstest"
)

func TestPermissions_OnlyTheOperatorReachesTheAdminPlane(t *testing.T) {
	for _, r := range natsconf.Roles() {
		p, err := r.Permissions()
		if err != nil {
			t.Fatal(err)
		}
		if r == natsconf.RoleOperator {
			if !slices.Contains(p.Publish.Allow, "$JS.API.>") || len(p.Publish.Deny) != 0 {
				t.Errorf("operator: %+v", p.Publish)
			}
			continue
		}
		for _, s := range []string{"CREATE", "UPDATE", "DELETE", "PURGE"} {
			if !slices.Contains(p.Publish.Deny, "$JS.API.STREAM."+s+".>") {
				t.Errorf("%s does not deny $JS.API.STREAM.%s.>", r, s)
			}
		}
		for _, a := range p.Publish.Allow {
			if strings.HasPrefix(a, "$JS.API.STREAM.") && !strings.HasPrefix(a, "$JS.API.STREAM.INFO.") &&
				!strings.HasPrefix(a, "$JS.API.STREAM.MSG.GET.") && a != "$JS.API.STREAM.MSG.DELETE.MAINT_DLQ" {
				t.Errorf("%s may publish %s", r, a)
			}
			if a == "$JS.API.>" || a == ">" {
				t.Errorf("%s may use the whole JetStream API", r)
			}
		}
	}
}

func TestPermissions_EveryRoleRepliesOnItsOwnInboxOnly(t *testing.T) {
	for _, r := range natsconf.Roles() {
		p, _ := r.Permissions()
		for _, s := range p.Subscribe.Allow {
			if strings.HasPrefix(s, "_INBOX") && s != r.InboxPrefix()+".>" {
				t.Errorf("%s may subscribe to %s", r, s)
			}
		}
		if !slices.Contains(p.Subscribe.Allow, r.InboxPrefix()+".>") {
			t.Errorf("%s cannot receive replies", r)
		}
	}
}

func TestPermissions_UnknownRole(t *testing.T) {
	if _, err := natsconf.Role("root").Permissions(); !errors.Is(err, natsconf.ErrUnknownRole) {
		t.Fatalf("Permissions = %v, want ErrUnknownRole", err)
	}
}

func TestNkeyUsers_RejectsInvalidUsers(t *testing.T) {
	a, b := natstest.NewUser(t).Public, natstest.NewUser(t).Public
	tests := []struct {
		name  string
		users []natsconf.User
	}{
		{"no users", nil},
		{"bad name", []natsconf.User{{Name: "Admin", Role: natsconf.RoleAdmin, Nkey: a}}},
		{"unknown role", []natsconf.User{{Name: "x", Role: "root", Nkey: a}}},
		{"not a public user key", []natsconf.User{{Name: "x", Role: natsconf.RoleAdmin, Nkey: "UNOTAKEY"}}},
		{"an environment reference", []natsconf.User{{Name: "x", Role: natsconf.RoleAdmin, Nkey: "$MAINT_X_NKEY"}}},
		{"one key in two roles", []natsconf.User{{Name: "x", Role: natsconf.RoleAdmin, Nkey: a}, {Name: "y", Role: natsconf.RoleReader, Nkey: a}}},
		{"one name twice", []natsconf.User{{Name: "x", Role: natsconf.RoleAdmin, Nkey: a}, {Name: "x", Role: natsconf.RoleReader, Nkey: b}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := natsconf.NkeyUsers(tt.users); !errors.Is(err, natsconf.ErrInvalidUser) {
				t.Fatalf("NkeyUsers = %v, want ErrInvalidUser", err)
			}
		})
	}
	users, err := natsconf.NkeyUsers([]natsconf.User{{Name: "x", Role: natsconf.RoleAdmin, Nkey: a}, {Name: "y", Role: natsconf.RoleReader, Nkey: b}})
	if err != nil || len(users) != 2 || users[1].Nkey != b || users[1].Permissions == nil {
		t.Fatalf("valid users: %+v, %v", users, err)
	}
}
