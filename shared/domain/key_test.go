package domain_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"maintsignals/shared/domain"
)

const aroID = "/subscriptions/0b1f6471-1bf0-4dda-aec3-cb9272f09590/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1"

// keyPattern is what a key may contain: one NATS subject token (no ".", "*", ">", space)
// and a valid JetStream KV key.
var keyPattern = regexp.MustCompile(`^[a-z0-9_/=-]+$`)

// referenceKey is an independent, deliberately naive implementation of the messaging contract (README).
func referenceKey(id string) string {
	s := strings.ToLower(id)
	s = strings.TrimPrefix(s, "/")
	var b strings.Builder
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '/', c == '-':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "=%02x", c)
		}
	}
	return b.String()
}

func TestKey_EncodesPerSpec(t *testing.T) {
	tests := []struct {
		name, id, want string
	}{
		{"lower-case letters and digits kept", "/abc123", "abc123"},
		{"upper case lowered", "/ABC", "abc"},
		{"leading slash dropped", "/a/b", "a/b"},
		{"no leading slash", "a/b", "a/b"},
		{"only the first leading slash dropped", "//a", "/a"},
		{"underscore, slash and dash kept", "/a_b/c-d", "a_b/c-d"},
		{"dot escaped as =2e", "/a.b", "a=2eb"},
		{"space escaped as =20", "/a b", "a=20b"},
		{"parentheses escaped", "/(x)", "=28x=29"},
		{"equals sign escaped as =3d", "/a=b", "a=3db"},
		{"colon escaped", "/a:b", "a=3ab"},
		{"NATS wildcards escaped", "/*>", "=2a=3e"},
		{"tilde escaped", "/~", "=7e"},
		{"trailing slash kept", "/a/", "a/"},
		{"lower-case e acute as UTF-8 bytes", "/é", "=c3=a9"},
		{"upper-case E acute lowered then escaped", "/É", "=c3=a9"},
		{"Greek capital sigma lowered", "/Σ", "=cf=83"},
		{"CJK escaped byte by byte", "/日本", "=e6=97=a5=e6=9c=ac"},
		{"emoji escaped byte by byte", "/🙂", "=f0=9f=99=82"},
		{"hex digits are lower case", "/\u00ff", "=c3=bf"},
		{
			"realistic ARO resource ID", aroID,
			"subscriptions/0b1f6471-1bf0-4dda-aec3-cb9272f09590/resourcegroups/rg-1/providers/microsoft=2eredhatopenshift/openshiftclusters/c1",
		},
		{
			"resource group with dots and parentheses",
			"/subscriptions/S/resourceGroups/My.RG(prod)/providers/Microsoft.RedHatOpenShift/openShiftClusters/C 1",
			"subscriptions/s/resourcegroups/my=2erg=28prod=29/providers/microsoft=2eredhatopenshift/openshiftclusters/c=201",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := domain.Key(tt.id)
			if err != nil {
				t.Fatalf("Key(%q): unexpected error %v", tt.id, err)
			}
			if got != tt.want {
				t.Fatalf("Key(%q) = %q, want %q", tt.id, got, tt.want)
			}
			if ref := referenceKey(tt.id); got != ref {
				t.Fatalf("Key(%q) = %q, reference encoder gives %q", tt.id, got, ref)
			}
			if !keyPattern.MatchString(got) {
				t.Fatalf("Key(%q) = %q is not a valid subject token / KV key", tt.id, got)
			}
			if got := domain.MustKey(tt.id); got != tt.want {
				t.Fatalf("MustKey(%q) = %q, want %q", tt.id, got, tt.want)
			}
		})
	}
}

func TestKey_EscapesDotsAsEq2e(t *testing.T) {
	got, err := domain.Key("/Microsoft.RedHatOpenShift")
	if err != nil {
		t.Fatal(err)
	}
	if got != "microsoft=2eredhatopenshift" {
		t.Fatalf("got %q", got)
	}
	if strings.Contains(got, ".") {
		t.Fatalf("key %q contains a dot: it would be more than one subject token", got)
	}
}

func TestKey_RoundTripsThroughDecodeKey(t *testing.T) {
	ids := []string{
		aroID,
		"/SUBSCRIPTIONS/ABC/RESOURCEGROUPS/RG/PROVIDERS/MICROSOFT.REDHATOPENSHIFT/OPENSHIFTCLUSTERS/C1",
		"no/leading/slash",
		"/with.dots.and spaces",
		"/parens(1)/and[brackets]",
		"/équipe/Été",
		"/Ελληνικά/ΣΊΣΥΦΟΣ",
		"/日本語/クラスタ",
		"/a=b=c",
		"/%20/+/&/?/#",
		"/trailing/",
		"//double",
		"/" + strings.Repeat("x", domain.MaxResourceIDBytes-1),
	}
	for _, id := range ids {
		t.Run(id, func(t *testing.T) {
			key, err := domain.Key(id)
			if err != nil {
				t.Fatalf("Key(%q): %v", id, err)
			}
			got, err := domain.DecodeKey(key)
			if err != nil {
				t.Fatalf("DecodeKey(%q): %v", key, err)
			}
			want := "/" + strings.TrimPrefix(strings.ToLower(id), "/")
			if got != want {
				t.Fatalf("DecodeKey(Key(%q)) = %q, want %q", id, got, want)
			}
			// The decoded ID names the same entity.
			if again, err := domain.Key(got); err != nil || again != key {
				t.Fatalf("Key(DecodeKey(key)) = %q, %v; want %q", again, err, key)
			}
		})
	}
}

func TestKey_IDsDifferingOnlyInCaseShareAKey(t *testing.T) {
	groups := [][]string{
		{aroID, strings.ToUpper(aroID), strings.ToLower(aroID), strings.TrimPrefix(aroID, "/")},
		{"/Été", "/ÉTÉ", "/été", "été"},
		{"/ΣΊΣΥΦΟΣ", "/σίσυφοσ"},
		{"/My.RG", "/my.rg", "/MY.RG"},
	}
	for _, g := range groups {
		want, err := domain.Key(g[0])
		if err != nil {
			t.Fatalf("Key(%q): %v", g[0], err)
		}
		for _, id := range g[1:] {
			got, err := domain.Key(id)
			if err != nil {
				t.Fatalf("Key(%q): %v", id, err)
			}
			if got != want {
				t.Errorf("Key(%q) = %q, Key(%q) = %q: same entity, different keys", id, got, g[0], want)
			}
		}
	}
}

func TestKey_DifferentIDsGetDifferentKeys(t *testing.T) {
	// The escape character itself is escaped, so no two IDs collide.
	pairs := [][2]string{
		{"/a.b", "/a=2eb"},
		{"/a b", "/a=20b"},
		{"/a/b", "/a_b"},
		{"/a-b", "/a_b"},
		{"/é", "/e"},
	}
	for _, p := range pairs {
		k1, k2 := domain.MustKey(p[0]), domain.MustKey(p[1])
		if k1 == k2 {
			t.Errorf("Key(%q) == Key(%q) == %q", p[0], p[1], k1)
		}
	}
}

func TestKey_RejectsInvalidResourceIDs(t *testing.T) {
	tests := []struct {
		name, id string
	}{
		{"empty", ""},
		{"slash alone", "/"},
		{"too long", "/" + strings.Repeat("a", domain.MaxResourceIDBytes)},
		{"too long without slash", strings.Repeat("a", domain.MaxResourceIDBytes+1)},
		{"too long in bytes though short in runes", "/" + strings.Repeat("é", domain.MaxResourceIDBytes/2)},
		{"invalid UTF-8", "/a\xffb"},
		{"truncated UTF-8 sequence", "/a\xc3"},
		{"overlong UTF-8 encoding", "/\xc0\xaf"},
		{"NUL", "/a\x00b"},
		{"newline", "/a\nb"},
		{"carriage return", "/a\rb"},
		{"tab", "/a\tb"},
		{"escape", "/a\x1bb"},
		{"DEL", "/a\x7fb"},
		{"C1 control", "/a\u0085b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := domain.ValidateResourceID(tt.id); !errors.Is(err, domain.ErrInvalidResourceID) {
				t.Errorf("ValidateResourceID(%q) = %v, want ErrInvalidResourceID", tt.id, err)
			}
			k, err := domain.Key(tt.id)
			if !errors.Is(err, domain.ErrInvalidResourceID) {
				t.Errorf("Key(%q) = %q, %v; want ErrInvalidResourceID", tt.id, k, err)
			}
			if k != "" {
				t.Errorf("Key(%q) returned key %q with its error", tt.id, k)
			}
		})
	}
}

func TestKey_AcceptsIDsUpToTheLimit(t *testing.T) {
	for _, id := range []string{
		"/" + strings.Repeat("a", domain.MaxResourceIDBytes-1),
		strings.Repeat("a", domain.MaxResourceIDBytes),
		"a",
		"/a",
	} {
		if err := domain.ValidateResourceID(id); err != nil {
			t.Errorf("ValidateResourceID(%d bytes): %v", len(id), err)
		}
		if _, err := domain.Key(id); err != nil {
			t.Errorf("Key(%d bytes): %v", len(id), err)
		}
	}
}

func TestMustKey_PanicsOnInvalidID(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("MustKey(\"\") did not panic")
		}
	}()
	domain.MustKey("")
}

func TestKey_RandomValidIDsGiveValidKeysThatRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("abcXYZ019_/-.=:() éÉσΣ日🙂%+~*>\u00a0")
	checked := 0
	for i := 0; i < 20000; i++ {
		var id string
		if i%2 == 0 {
			// Arbitrary bytes: most are not valid IDs, the valid ones must behave.
			b := make([]byte, 1+rng.IntN(40))
			for j := range b {
				b[j] = byte(rng.IntN(256))
			}
			id = string(b)
		} else {
			r := make([]rune, 1+rng.IntN(40))
			for j := range r {
				r[j] = alphabet[rng.IntN(len(alphabet))]
			}
			id = string(r)
		}
		if domain.ValidateResourceID(id) != nil {
			if _, err := domain.Key(id); !errors.Is(err, domain.ErrInvalidResourceID) {
				t.Fatalf("Key(%q) accepted an ID that ValidateResourceID refuses: %v", id, err)
			}
			continue
		}
		checked++
		checkKeyProperties(t, id)
	}
	if checked < 5000 {
		t.Fatalf("only %d valid IDs generated; the generator is broken", checked)
	}
}

func FuzzKey(f *testing.F) {
	for _, s := range []string{aroID, "/a.b", "/É", "/日本", "", "/", "a\x00", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if domain.ValidateResourceID(id) != nil {
			if _, err := domain.Key(id); !errors.Is(err, domain.ErrInvalidResourceID) {
				t.Fatalf("Key(%q) = %v, want ErrInvalidResourceID", id, err)
			}
			return
		}
		checkKeyProperties(t, id)
	})
}

func checkKeyProperties(t *testing.T, id string) {
	t.Helper()
	key, err := domain.Key(id)
	if err != nil {
		t.Fatalf("Key(%q): %v", id, err)
	}
	if !keyPattern.MatchString(key) {
		t.Fatalf("Key(%q) = %q does not match %s", id, key, keyPattern)
	}
	if ref := referenceKey(id); key != ref {
		t.Fatalf("Key(%q) = %q, reference gives %q", id, key, ref)
	}
	got, err := domain.DecodeKey(key)
	if err != nil {
		t.Fatalf("DecodeKey(%q): %v", key, err)
	}
	if want := "/" + strings.TrimPrefix(strings.ToLower(id), "/"); got != want {
		t.Fatalf("DecodeKey(Key(%q)) = %q, want %q", id, got, want)
	}
	if !utf8.ValidString(got) {
		t.Fatalf("DecodeKey(Key(%q)) = %q is not valid UTF-8", id, got)
	}
}

func TestDecodeKey_RejectsMalformedKeys(t *testing.T) {
	tests := []struct {
		name, key string
	}{
		{"empty", ""},
		{"lone equals", "="},
		{"equals at end", "abc="},
		{"non-hex escape", "=zz"},
		{"half non-hex escape", "=2z"},
		{"short escape", "=4"},
		{"short escape at end", "abc=4"},
		{"upper-case hex escape", "a=2Eb"},
		{"upper-case letter", "A"},
		{"upper-case letter inside", "abC"},
		{"dot", "."},
		{"dot inside", "a.b"},
		{"space", "a b"},
		{"wildcard", "a*"},
		{"non-ASCII", "é"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := domain.DecodeKey(tt.key)
			if !errors.Is(err, domain.ErrInvalidResourceID) {
				t.Fatalf("DecodeKey(%q) = %q, %v; want ErrInvalidResourceID", tt.key, got, err)
			}
		})
	}
}

func TestDecodeKey_DecodesEscapes(t *testing.T) {
	tests := []struct{ key, want string }{
		{"a", "/a"},
		{"a=2eb", "/a.b"},
		{"=3d", "/="},
		{"=c3=a9t=c3=a9", "/été"},
		{"a/b_c-d", "/a/b_c-d"},
		{"/x", "//x"},
	}
	for _, tt := range tests {
		got, err := domain.DecodeKey(tt.key)
		if err != nil || got != tt.want {
			t.Errorf("DecodeKey(%q) = %q, %v; want %q", tt.key, got, err, tt.want)
		}
	}
}

// keyByTheDefinition is Key written as the contract says it, step by step.
func keyByTheDefinition(id string) string {
	s := strings.TrimPrefix(strings.ToLower(id), "/")
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '/' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "=%02x", c)
		}
	}
	return b.String()
}

func TestKey_EqualsTheDefinitionOnMixedInput(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "Z", "0", "/", "-", "_", ".", " ", "~", "=", "É", "ß", "İ", "Σ", "日", "ǅ", "\u212a"}
	for range 5000 {
		var b strings.Builder
		for range 1 + r.IntN(40) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		id := b.String()
		got, err := domain.Key(id)
		if domain.ValidateResourceID(id) != nil {
			continue
		}
		if want := keyByTheDefinition(id); err != nil || got != want {
			t.Fatalf("Key(%q) = %q, %v; the definition gives %q", id, got, err, want)
		}
	}
}
