package subscription_test

import (
	"strings"
	"testing"

	"maintsignals/shared/domain"
	"maintsignals/shared/subscription"
)

const (
	sub    = "/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333"
	rg     = sub + "/resourceGroups/rg-1"
	secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

// keyOf is the located name of name in scope.
func keyOf(t *testing.T, scope, name string) string {
	t.Helper()
	sc, err := subscription.ParseScope(scope)
	if err != nil {
		t.Fatal(err)
	}
	return domain.SubscriptionKey(domain.TenantOf(sc.Key), name)
}

func TestDecodeCommand_RefusesWhatIsWrongNamingTheField(t *testing.T) {
	create := func(extra string) string {
		return `{"id": "s-1", "action": "create", "name": "crm", "scope": "` + rg + `", "url": "https://hooks.example.com/in", "secret": "` + secret + `"` + extra + `}`
	}
	for _, tc := range []struct {
		name, body string
		key        string // "" : the command's own
		code       domain.Code
		target     string
	}{
		{name: "not JSON", body: `{`, code: domain.CodeInvalidRequestContent},
		{name: "an unknown field", body: create(`, "caFile": "/etc/passwd"`), code: domain.CodeInvalidParameter, target: "caFile"},
		{name: "no id", body: `{"action": "create", "name": "crm", "scope": "` + rg + `"}`, code: domain.CodeInvalidParameter, target: "id"},
		{name: "an unknown action", body: `{"id": "s-1", "action": "update", "name": "crm", "scope": "` + rg + `"}`, code: domain.CodeInvalidParameter, target: "action"},
		{name: "a name with a dot", body: `{"id": "s-1", "action": "delete", "name": "a.b", "scope": "` + rg + `"}`, code: domain.CodeInvalidParameter, target: "name"},
		{name: "a scope outside any subscription", body: `{"id": "s-1", "action": "delete", "name": "crm", "scope": "/providers/x/y"}`, code: domain.CodeInvalidParameter, target: "scope"},
		{name: "a scope that is no policy scope", body: `{"id": "s-1", "action": "delete", "name": "crm", "scope": "` + sub + `/resourceGroups"}`, code: domain.CodeInvalidParameter, target: "scope"},
		{name: "sent on another tenant's subject", body: create(``), key: keyOf(t, sub+"0/resourceGroups/rg-1", "crm"), code: domain.CodeInvalidParameter, target: "scope"},
		{name: "a plain http endpoint", body: strings.Replace(create(``), "https://", "http://", 1), code: domain.CodeInvalidParameter, target: "url"},
		{name: "an endpoint without a host", body: strings.Replace(create(``), "https://hooks.example.com/in", "https:///in", 1), code: domain.CodeInvalidParameter, target: "url"},
		{name: "an endpoint too long", body: strings.Replace(create(``), "/in", "/"+strings.Repeat("a", subscription.MaxURLBytes), 1), code: domain.CodeInvalidParameter, target: "url"},
		{name: "credentials in the endpoint", body: strings.Replace(create(``), "https://", "https://u:p@", 1), code: domain.CodeInvalidParameter, target: "url"},
		{name: "no secret", body: strings.Replace(create(``), secret, "", 1), code: domain.CodeInvalidParameter, target: "secret"},
		{name: "a short secret", body: strings.Replace(create(``), secret, "whsec_c2hvcnQ=", 1), code: domain.CodeInvalidParameter, target: "secret"},
		{name: "an unknown type", body: create(`, "types": ["io.maintsignals.nope"]`), code: domain.CodeInvalidParameter, target: "types"},
		{name: "a state cased otherwise", body: create(`, "states": ["pending"]`), code: domain.CodeInvalidParameter, target: "states"},
		{name: "an unknown category", body: create(`, "categories": ["urgent"]`), code: domain.CodeInvalidParameter, target: "categories"},
		{name: "a delete with an endpoint", body: `{"id": "s-1", "action": "delete", "name": "crm", "scope": "` + rg + `", "url": "https://x.example"}`, code: domain.CodeInvalidParameter, target: "url"},
		{name: "a delete with a secret", body: `{"id": "s-1", "action": "delete", "name": "crm", "scope": "` + rg + `", "secret": "` + secret + `"}`, code: domain.CodeInvalidParameter, target: "secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.key
			if key == "" {
				key = keyOf(t, rg, "crm")
			}
			_, rej := subscription.DecodeCommand([]byte(tc.body), key, "")
			if rej == nil || rej.Code != tc.code || rej.Target != tc.target {
				t.Fatalf("rejection %v, want %s on %q", rej, tc.code, tc.target)
			}
			if strings.Contains(rej.Message, secret[6:]) || strings.Contains(rej.Message, "/in") {
				t.Errorf("the message quotes the secret or the endpoint's path: %s", rej.Message)
			}
		})
	}
}

func TestDecodeCommand_ReadsACreateAndADelete(t *testing.T) {
	body := `{"id": "s-1", "action": "create", "name": "crm", "scope": "` + rg + `/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1", "url": "https://hooks.example.com/in",
		"secret": "` + secret + `", "types": ["io.maintsignals.command.applied"], "states": ["Pending"], "categories": ["planned"], "inWindow": true}`
	c, rej := subscription.DecodeCommand([]byte(body), "0b1f6471-1bf0-4dda-aec3-111122223333.rg-1.crm", "s-1")
	if rej != nil {
		t.Fatal(rej)
	}
	if c.Key() != "0b1f6471-1bf0-4dda-aec3-111122223333.rg-1.crm" || *c.InWindow != true || c.Filters().States[0] != domain.StatePending {
		t.Errorf("command %+v", c)
	}
	if strings.Contains(c.String(), secret) {
		t.Errorf("String shows the secret: %s", c)
	}
	d, rej := subscription.DecodeCommand([]byte(`{"id": "s-2", "action": "delete", "name": "crm", "scope": "`+sub+`"}`), "0b1f6471-1bf0-4dda-aec3-111122223333._.crm", "")
	if rej != nil || d.Action != domain.SubscriptionDelete {
		t.Fatalf("delete: %+v, %v", d, rej)
	}
}

func TestNewSecret_IsAStandardWebhooksSecretEachTimeNew(t *testing.T) {
	a, err := subscription.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := subscription.NewSecret()
	key, err := subscription.DecodeSecret(a)
	if err != nil || len(key) != subscription.SecretBytes || a == b || !strings.HasPrefix(a, "whsec_") {
		t.Fatalf("secrets %q %q: %v", a, b, err)
	}
}
