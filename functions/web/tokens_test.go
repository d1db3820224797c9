package web

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"maintsignals/shared/domain"
)

const (
	tokenA = "contoso-0123456789abcdef"
	tokenB = "fabrikam+/0123456789abcdef=="
)

func TestParseTokens_ReadsEachHoldersNameAndScopes(t *testing.T) {
	entries, rej := ParseTokens([]byte(`[
		{"name": "contoso", "token": "` + tokenA + `", "scopes": ["/subscriptions/S1", "/subscriptions/s2/resourceGroups/RG-1"]},
		{"name": "fabrikam", "token": "` + tokenB + `", "scopes": ["/subscriptions/s3/"]}
	]`))
	if rej != nil {
		t.Fatal(rej)
	}
	if len(entries) != 2 || entries[0].Name != "contoso" || len(entries[0].Scopes) != 2 || entries[1].Token != tokenB {
		t.Fatalf("entries %+v", entries)
	}
	c := entries[0].customer()
	for key, want := range map[string]bool{
		domain.MustKey(rid("s1", "rg-9", "c")):  true,
		domain.MustKey(rid("s2", "rg-1", "c")):  true,
		domain.MustKey(rid("s2", "rg-10", "c")): false,
		domain.MustKey(rid("s10", "rg-1", "c")): false,
		domain.MustKey(rid("s3", "rg-1", "c")):  false,
	} {
		if c.Covers(key) != want {
			t.Errorf("contoso covers %s: %v, want %v", key, !want, want)
		}
	}
}

func TestParseTokens_ABadFileIsRefusedNamingTheField(t *testing.T) {
	good := `{"name": "contoso", "token": "` + tokenA + `", "scopes": ["/subscriptions/s1"]}`
	for _, tc := range []struct {
		name   string
		file   string
		code   domain.Code
		target string
		says   string
	}{
		{"not JSON", `[{"name": `, domain.CodeInvalidRequestContent, "", "JSON array of tokens"},
		{"an object, not an array", good, domain.CodeInvalidRequestContent, "", "JSON array of tokens"},
		{"no token", `[]`, domain.CodeInvalidRequestContent, "", "lists no token"},
		{"an entry that is no object", `[` + good + `, "x"]`, domain.CodeInvalidRequestContent, "", "[1] is not a JSON object"},
		{"a misspelt field", `[{"name": "a", "token": "` + tokenA + `", "scope": ["/subscriptions/s1"]}]`, domain.CodeInvalidParameter, "[0].scope", `unknown field "scope"`},
		{"a field given twice", `[{"name": "a", "name": "b", "token": "` + tokenA + `", "scopes": ["/subscriptions/s1"]}]`, domain.CodeInvalidParameter, "[0].name", "given twice"},
		{"scopes of another type", `[{"name": "a", "token": "` + tokenA + `", "scopes": "/subscriptions/s1"}]`, domain.CodeInvalidParameter, "[0].scopes", "JSON array"},
		{"a name with a space", `[{"name": "a b", "token": "` + tokenA + `", "scopes": ["/subscriptions/s1"]}]`, domain.CodeInvalidParameter, "[0].name", "1 to 64"},
		{"a short token", `[{"name": "a", "token": "short", "scopes": ["/subscriptions/s1"]}]`, domain.CodeInvalidParameter, "[0].token", "at least 16"},
		{"a token unfit for a header", `[{"name": "a", "token": "` + tokenA + ` ;x", "scopes": ["/subscriptions/s1"]}]`, domain.CodeInvalidParameter, "[0].token", "letters, digits"},
		{"no scope", `[{"name": "a", "token": "` + tokenA + `"}]`, domain.CodeInvalidParameter, "[0].scopes", "no scope"},
		{"an empty list of scopes", `[{"name": "a", "token": "` + tokenA + `", "scopes": []}]`, domain.CodeInvalidParameter, "[0].scopes", "no scope"},
		{"a scope that is no tenant", `[` + good + `, {"name": "b", "token": "` + tokenB + `", "scopes": ["/subscriptions/s1", "/subscriptions/s1/resourceGroups/rg/providers/x"]}]`, domain.CodeInvalidParameter, "[1].scopes[1]", "is not /subscriptions/<id>"},
		{"the whole fleet as a scope", `[{"name": "a", "token": "` + tokenA + `", "scopes": ["/"]}]`, domain.CodeInvalidParameter, "[0].scopes[0]", "invalid scope"},
		{"a name used twice", `[` + good + `, {"name": "contoso", "token": "` + tokenB + `", "scopes": ["/subscriptions/s2"]}]`, domain.CodeInvalidParameter, "[1].name", "entry 0"},
		{"a token used twice", `[` + good + `, {"name": "other", "token": "` + tokenA + `", "scopes": ["/subscriptions/s2"]}]`, domain.CodeInvalidParameter, "[1].token", "entry 0 (contoso)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rej := ParseTokens([]byte(tc.file))
			if rej == nil {
				t.Fatal("accepted")
			}
			if rej.Code != tc.code || rej.Target != tc.target || !strings.Contains(rej.Message, tc.says) {
				t.Errorf("%s (%s): %s; want %s (%s) saying %q", rej.Code, rej.Target, rej.Message, tc.code, tc.target, tc.says)
			}
			if strings.Contains(rej.Error(), tokenA) || strings.Contains(rej.Error(), tokenB) {
				t.Errorf("the error shows a token: %s", rej)
			}
		})
	}
}

func TestConfig_ATokensFileIsReadAtStart(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	operator := write("token", tokenA+"\n")
	good := write("good.json", `[{"name": "fabrikam", "token": "`+tokenB+`", "scopes": ["/subscriptions/s1"]}]`)
	bad := write("bad.json", `[{"name": "fabrikam", "token": "`+tokenB+`", "scopes": ["/subscriptions"]}]`)
	clash := write("clash.json", `[{"name": "fabrikam", "token": "`+tokenA+`", "scopes": ["/subscriptions/s1"]}]`)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // in the error; "" none
	}{
		{"customer tokens alone open the network", Config{Listen: ":8080", TokensFile: good}, ""},
		{"with the operator's", Config{Listen: ":8080", TokenFile: operator, TokensFile: good}, ""},
		{"a bad scope names its field", Config{TokensFile: bad}, "bad.json: InvalidParameter ([0].scopes[0])"},
		{"a missing file", Config{TokensFile: filepath.Join(dir, "missing.json")}, "missing.json"},
		{"the operator's token as a customer's", Config{TokenFile: operator, TokensFile: clash}, "InvalidParameter ([0].token): of fabrikam is the operator's token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
				return
			case err == nil:
				t.Fatal("accepted")
			case !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, ErrInvalidTokens) || !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), tokenA) || strings.Contains(err.Error(), tokenB) {
				t.Errorf("the error shows a token: %v", err)
			}
		})
	}
}

func TestTokens_LookupFindsTheHolderOfEachToken(t *testing.T) {
	var ts tokens
	contoso := customer(t, "contoso", "/subscriptions/s1")
	ts.add(tokenA, nil)
	ts.add(tokenB, contoso)
	for _, tc := range []struct {
		name   string
		token  string
		holder *Customer
		ok     bool
	}{
		{"the operator's", tokenA, nil, true},
		{"a customer's", tokenB, contoso, true},
		{"a prefix of one", tokenB[:len(tokenB)-1], nil, false},
		{"one with more after it", tokenB + "x", nil, false},
		{"another casing", strings.ToUpper(tokenA), nil, false},
		{"none", "", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := ts.lookup(tc.token)
			if h != tc.holder || ok != tc.ok {
				t.Errorf("holder %v %v, want %v %v", h, ok, tc.holder, tc.ok)
			}
		})
	}
	var none tokens
	if _, ok := none.lookup(""); ok || none.any() {
		t.Error("a view without tokens takes the empty one")
	}
}
