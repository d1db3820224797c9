package webhook_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"maintsignals/functions/webhook"
)

// The product's signature is the one the reference library computes and verifies.
func TestSign_MatchesTheStandardWebhooksReference(t *testing.T) {
	ref, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	subs, err := webhook.Parse([]byte(`[{"name":"a","url":"https://example.com/h","secret":"` + secret + `"}]`))
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Now()
	body := []byte(`{"commandId":"c-1","outcome":"applied"}`)
	want, _ := ref.Sign("cmd-1:7", ts, body)
	if got := webhook.Sign(subs[0].Key(), "cmd-1:7", ts, body); got != want {
		t.Fatalf("signature %s, reference %s", got, want)
	}
	h := http.Header{}
	h.Set("webhook-id", "cmd-1:7")
	h.Set("webhook-timestamp", strconvI(ts.Unix()))
	h.Set("webhook-signature", webhook.Sign(subs[0].Key(), "cmd-1:7", ts, body))
	if err := ref.Verify(body, h); err != nil {
		t.Fatal(err)
	}
	h.Set("webhook-id", "cmd-1:8")
	if err := ref.Verify(body, h); err == nil {
		t.Fatal("a signature verified for another id")
	}
}

func TestParse_RefusesBadSubscriptions(t *testing.T) {
	caBad := filepath.Join(t.TempDir(), "ca.pem")
	_ = os.WriteFile(caBad, []byte("not a certificate"), 0o600)
	for name, c := range map[string]struct{ json, want string }{
		"not an array":     {`{"name":"a"}`, "JSON array"},
		"unknown field":    {`[{"name":"a","url":"https://x","secret":"` + secret + `","state":["Pending"]}]`, "unknown field"},
		"bad name":         {`[{"name":"a.b","url":"https://x","secret":"` + secret + `"}]`, "name must be"},
		"relative url":     {`[{"name":"a","url":"/hook","secret":"` + secret + `"}]`, "absolute http(s) URL"},
		"ftp url":          {`[{"name":"a","url":"ftp://x/","secret":"` + secret + `"}]`, "absolute http(s) URL"},
		"no prefix":        {`[{"name":"a","url":"https://x","secret":"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}]`, `"whsec_"`},
		"not base64":       {`[{"name":"a","url":"https://x","secret":"whsec_!!!"}]`, "base64"},
		"short secret":     {`[{"name":"a","url":"https://x","secret":"whsec_YWJj"}]`, "at least 16 bytes"},
		"unknown type":     {`[{"name":"a","url":"https://x","secret":"` + secret + `","types":["io.maintsignals.command.applyed"]}]`, "is not one of"},
		"unknown state":    {`[{"name":"a","url":"https://x","secret":"` + secret + `","states":["pending"]}]`, "is not one of"},
		"unknown category": {`[{"name":"a","url":"https://x","secret":"` + secret + `","categories":["Planned"]}]`, "is not"},
		"same name":        {`[{"name":"a","url":"https://x","secret":"` + secret + `"},{"name":"a","url":"https://y","secret":"` + secret + `"}]`, "used twice"},
		"missing CA":       {`[{"name":"a","url":"https://x","secret":"` + secret + `","caFile":"/nonexistent/ca.pem"}]`, "caFile"},
		"CA without PEM":   {`[{"name":"a","url":"https://x","secret":"` + secret + `","caFile":"` + caBad + `"}]`, "no PEM"},
	} {
		_, err := webhook.Parse([]byte(c.json))
		if !errors.Is(err, webhook.ErrInvalidSubscription) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error shows the secret", name)
		}
	}
	// The URL's path and query (which may hold a token) stay out of errors and of String.
	_, err := webhook.Parse([]byte(`[{"name":"a","url":"gopher://host/p?token=s3cr3t","secret":"` + secret + `"}]`))
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("error %v", err)
	}
	subs, err := webhook.Parse([]byte(`[{"name":"a","url":"https://host/p?token=s3cr3t","secret":"` + secret + `"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if s := subs[0].String(); strings.Contains(s, "s3cr3t") || strings.Contains(s, secret) {
		t.Fatalf("String() = %s", s)
	}
}

func TestAttempts_RetryForAtLeast24Hours(t *testing.T) {
	n := webhook.Attempts(webhook.DefaultBackoff, webhook.DefaultRetryFor)
	var total time.Duration
	for i := 1; i < n; i++ {
		total += webhook.DefaultBackoff[min(i-1, len(webhook.DefaultBackoff)-1)]
	}
	if total < 24*time.Hour {
		t.Fatalf("%d attempts span %s, want at least 24h", n, total)
	}
	t.Logf("%d attempts over %s", n, total)
}

func strconvI(n int64) string { return strconv.FormatInt(n, 10) }
