package policy_test

import (
	"strings"
	"testing"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

const rgScope = "/subscriptions/0b1f/resourceGroups/rg-1"

func TestDecodeCommand_SetAndDelete(t *testing.T) {
	key := domain.MustKey(rgScope)
	set, rej := policy.DecodeCommand([]byte(`{"id": "p1", "scope": "`+rgScope+`", "policy": {"windows": [`+weekdays+`], "minNotice": "72h"}, "actor": "ops", "issuedAt": "2026-06-01T12:00:00Z"}`), key, "p1")
	if rej != nil {
		t.Fatalf("set: %v", rej)
	}
	if set.Action() != domain.PolicySet || set.Policy.Scope != rgScope || set.ParsedScope().Key != key || set.Actor != "ops" {
		t.Errorf("set read as %+v", set)
	}
	p, rej := set.Compile(setAt)
	if rej != nil || p.MinNotice().Hours() != 72 {
		t.Errorf("Compile: %v, %v", p, rej)
	}
	// The policy's own scope, in another casing, is the command's.
	cased, rej := policy.DecodeCommand([]byte(`{"id": "p2", "scope": "`+rgScope+`", "policy": {"scope": "`+strings.ToUpper(rgScope)+`"}}`), key, "")
	if rej != nil || cased.Policy.Scope != rgScope {
		t.Errorf("cased scope: %+v, %v", cased.Policy, rej)
	}
	del, rej := policy.DecodeCommand([]byte(`{"id": "p3", "scope": "`+rgScope+`", "policy": null}`), key, "")
	if rej != nil || del.Action() != domain.PolicyDelete || del.Policy != nil {
		t.Errorf("delete: %+v, %v", del, rej)
	}
	if p, rej := del.Compile(setAt); p != nil || rej != nil {
		t.Errorf("a delete compiles to %v, %v; want nothing", p, rej)
	}
	body, err := set.Encode()
	if err != nil {
		t.Fatal(err)
	}
	again, rej := policy.DecodeCommand(body, key, "")
	if rej != nil || again.ID != "p1" || again.Policy.MinNotice != "72h" {
		t.Errorf("encoded %s read back as %+v, %v", body, again, rej)
	}
}

func TestDecodeCommand_RefusesEachFaultWithItsTarget(t *testing.T) {
	key := domain.MustKey(rgScope)
	scope := `"scope": "` + rgScope + `"`
	for _, tc := range []struct {
		name, body, msgID string
		code              domain.Code
		target            string
	}{
		{"not JSON", `{`, "", domain.CodeInvalidRequestContent, ""},
		{"not an object", `[1]`, "", domain.CodeInvalidRequestContent, ""},
		{"not UTF-8", "{\"id\": \"\xff\"}", "", domain.CodeInvalidRequestContent, ""},
		{"too large", `{"id": "` + strings.Repeat("a", domain.MaxCommandBytes) + `"}`, "", domain.CodeInvalidRequestContent, ""},
		{"no id", `{` + scope + `, "policy": null}`, "", domain.CodeInvalidParameter, "id"},
		{"a bad id", `{"id": "a b", ` + scope + `, "policy": null}`, "", domain.CodeInvalidParameter, "id"},
		{"an id that is not the header's", `{"id": "p1", ` + scope + `, "policy": null}`, "p2", domain.CodeInvalidParameter, "id"},
		{"an unknown field", `{"id": "p1", ` + scope + `, "policy": null, "force": true}`, "", domain.CodeInvalidParameter, "force"},
		{"a field cased otherwise", `{"ID": "p1", ` + scope + `, "policy": null}`, "", domain.CodeInvalidParameter, "ID"},
		{"a field twice", `{"id": "p1", "id": "p2", ` + scope + `, "policy": null}`, "", domain.CodeInvalidParameter, "id"},
		{"no scope", `{"id": "p1", "policy": null}`, "", domain.CodeInvalidParameter, "scope"},
		{"a scope that is no scope", `{"id": "p1", "scope": "/subscriptions/0b1f/resourceGroups", "policy": null}`, "", domain.CodeInvalidParameter, "scope"},
		{"a scope with a trailing slash", `{"id": "p1", "scope": "/subscriptions/0b1f/", "policy": null}`, "", domain.CodeInvalidParameter, "scope"},
		{"a scope of another subject", `{"id": "p1", "scope": "/subscriptions/other", "policy": null}`, "", domain.CodeInvalidParameter, "scope"},
		{"no policy", `{"id": "p1", ` + scope + `}`, "", domain.CodeInvalidParameter, "policy"},
		{"a policy that is not an object", `{"id": "p1", ` + scope + `, "policy": 5}`, "", domain.CodeInvalidParameter, "policy"},
		{"a policy of another scope", `{"id": "p1", ` + scope + `, "policy": {"scope": "/subscriptions/0b1f"}}`, "", domain.CodeInvalidParameter, "scope"},
		{"a policy with an unknown field", `{"id": "p1", ` + scope + `, "policy": {"window": []}}`, "", domain.CodeInvalidParameter, "window"},
		{"a window's field", `{"id": "p1", ` + scope + `, "policy": {"windows": [{"rrule": 1}]}}`, "", domain.CodeInvalidParameter, "windows[0].rrule"},
		{"an actor with a control character", `{"id": "p1", ` + scope + `, "policy": null, "actor": "a\u0007"}`, "", domain.CodeInvalidParameter, "actor"},
		{"an issuedAt that is no time", `{"id": "p1", ` + scope + `, "policy": null, "issuedAt": "yesterday"}`, "", domain.CodeInvalidParameter, "issuedAt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rej := policy.DecodeCommand([]byte(tc.body), key, tc.msgID)
			if rej == nil || rej.Code != tc.code || rej.Target != tc.target {
				t.Errorf("DecodeCommand = %v, want %s on %q", rej, tc.code, tc.target)
			}
		})
	}
}

func TestCommandCompile_RefusesAtTheStoredTime(t *testing.T) {
	key := domain.MustKey(rgScope)
	for _, tc := range []struct{ name, policy, target string }{
		{"a bad rule", `{"windows": [` + window("FREQ=HOURLY", "22:00", "6h") + `]}`, "windows[0].rrule"},
		{"a bad time zone", `{"timeZone": "Mars/Olympus"}`, "timeZone"},
		{"too little open time", `{"windows": [` + window("FREQ=MONTHLY;BYMONTHDAY=1", "00:00", "24h") + `]}`, "windows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, rej := policy.DecodeCommand([]byte(`{"id": "p1", "scope": "`+rgScope+`", "policy": `+tc.policy+`}`), key, "")
			if rej != nil {
				t.Fatalf("DecodeCommand: %v", rej)
			}
			if _, rej := c.Compile(setAt); rej == nil || rej.Code != domain.CodeInvalidParameter || rej.Target != tc.target {
				t.Errorf("Compile = %v, want InvalidParameter on %q", rej, tc.target)
			}
		})
	}
}
