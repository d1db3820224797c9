package web_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"maintsignals/functions/web"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

func TestFleetPage_CountsFilterAndPagesWhatTheCommandsDid(t *testing.T) {
	s := startStack(t, web.Config{})
	start := time.Now().Add(72 * time.Hour).Truncate(time.Hour)
	for _, n := range []string{"a", "b", "c"} {
		s.send(t, rid("s1", n), domain.TaskPending, withWindow(start, 4*time.Hour))
	}
	s.send(t, rid("s2", "d"), domain.TaskEverything, nil)
	s.send(t, rid("s2", "e"), domain.TaskCustomerActionNeeded, nil)

	testenv.Eventually(t, 5*time.Second, "every command counted", func() bool { return s.fleet(t, "").Entities == 5 })
	p := s.fleet(t, "")
	if p.States[domain.StatePending] != 3 || p.States[domain.StateUnplanned] != 1 || p.States[domain.StateCustomerActionNeeded] != 1 || p.Updating != 1 {
		t.Errorf("counts: %+v", p.Stats)
	}
	if p.Matches != 5 || len(p.Rows) != 5 || p.Rows[0].ResourceID != rid("s1", "a") || p.Rows[4].ResourceID != rid("s2", "e") {
		t.Errorf("table: %d of %d, %+v", len(p.Rows), p.Matches, p.Rows)
	}
	// The window on its day of the time line.
	day := start.UTC().Format(time.DateOnly)
	var seen bool
	for _, d := range p.Timeline.Days {
		if d.Date == day {
			seen = d.Windows == 3 && len(d.First) == 3 && d.First[0].ResourceID == rid("s1", "a")
		} else if d.Windows != 0 {
			t.Errorf("%s has %d windows", d.Date, d.Windows)
		}
	}
	if !seen || len(p.Timeline.Days) != web.DefaultDays {
		t.Errorf("time line: %+v", p.Timeline.Days)
	}

	q := "?" + url.Values{"state": {"pending"}, "prefix": {"/subscriptions/S1/"}, "limit": {"2"}}.Encode()
	first := s.fleet(t, q)
	if first.Matches != 3 || len(first.Rows) != 2 || first.Next == "" || first.Prev != "" || first.Filter.State != domain.StatePending {
		t.Fatalf("filtered first page: %+v", first)
	}
	second := s.fleet(t, q+"&after="+url.QueryEscape(first.Next))
	if len(second.Rows) != 1 || second.Rows[0].ResourceID != rid("s1", "c") || second.Next != "" || second.Prev == "" {
		t.Errorf("filtered second page: %+v", second)
	}
	if none := s.fleet(t, "?state=Planned"); none.Matches != 0 || len(none.Rows) != 0 {
		t.Errorf("nothing planned: %+v", none)
	}

	var e struct{ Status int }
	if code := getJSON(t, s.url+"/?state=Bogus", &e); code != http.StatusBadRequest || e.Status != http.StatusBadRequest {
		t.Errorf("an unknown state: %d %+v", code, e)
	}
}

// A Forget takes the entity out of the fleet from the record it writes, as a deleted key.
func TestFleetPage_LeavesForgottenEntitiesOut(t *testing.T) {
	s := startStack(t, web.Config{})
	s.send(t, rid("s1", "kept"), domain.TaskCustomerActionNeeded, nil)
	s.send(t, rid("s1", "gone"), domain.TaskCustomerActionNeeded, nil)
	testenv.Eventually(t, 5*time.Second, "both counted", func() bool { return s.fleet(t, "").Entities == 2 })
	s.send(t, rid("s1", "gone"), domain.TaskForget, nil)
	testenv.Eventually(t, 5*time.Second, "the forgotten one left out", func() bool { return s.fleet(t, "").Entities == 1 })
	if p := s.fleet(t, ""); len(p.Rows) != 1 || p.Rows[0].ResourceID != rid("s1", "kept") || p.States[domain.StateCustomerActionNeeded] != 1 {
		t.Errorf("fleet after a Forget: %d rows %+v, counts %+v", len(p.Rows), p.Rows, p.Stats)
	}
}

func TestFleetPage_WorksWithoutJavaScript(t *testing.T) {
	s := startStack(t, web.Config{})
	s.send(t, rid("s1", "a"), domain.TaskPending, nil)
	testenv.Eventually(t, 5*time.Second, "the entity listed", func() bool { return s.fleet(t, "").Entities == 1 })
	code, b := get(t, s.url+"/", "text/html")
	html := string(b)
	key := domain.MustKey(rid("s1", "a"))
	for _, want := range []string{`<a href="/entities/` + key + `">` + rid("s1", "a") + `</a>`, `<form method="get" action="/"`, `data-count="Pending">1<`, `<script src="/assets/live.js" defer>`} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if code != http.StatusOK {
		t.Errorf("status %d", code)
	}
	code, b = get(t, s.url+"/assets/live.js", "*/*")
	if code != http.StatusOK || !strings.Contains(string(b), "EventSource") {
		t.Errorf("the script: %d", code)
	}
	resp, err := http.Post(s.url+"/", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("a POST: %d", resp.StatusCode)
	}
}

func TestEntityPage_RecordHistoryAndNoEntityNeverSeen(t *testing.T) {
	s := startStack(t, web.Config{})
	id := rid("s1", "c1")
	s.send(t, id, domain.TaskPending, withWindow(time.Now().Add(48*time.Hour), time.Hour))
	s.send(t, id, domain.TaskEverything, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.cl.Send(ctx, domain.Command{ID: "refused-1", ResourceID: id, Task: domain.TaskNone}); err == nil {
		t.Fatal("a None while updating was applied")
	}
	key := domain.MustKey(id)
	var p web.EntityPage
	if code := getJSON(t, s.url+"/entities/"+key, &p); code != http.StatusOK {
		t.Fatalf("entity page: %d", code)
	}
	r := p.Record
	if r.ResourceID != id || r.State != domain.StatePlanned || !r.Updating || r.Task != domain.TaskEverything || r.Window == nil || r.Revision == 0 {
		t.Errorf("record: %+v", r)
	}
	if p.HistoryTotal != 3 || len(p.History) != 3 || p.History[2].CommandID != "refused-1" || p.History[2].Code != domain.CodeRequestNotAllowed || p.History[0].Task != domain.TaskPending {
		t.Errorf("history: %d %+v", p.HistoryTotal, p.History)
	}
	if p.Policy != nil {
		t.Errorf("policy without a policies bucket: %+v", p.Policy)
	}
	code, b := get(t, s.url+"/entities/"+key, "text/html")
	if code != http.StatusOK || !strings.Contains(string(b), "No policy") || !strings.Contains(string(b), "refused-1") {
		t.Errorf("entity page HTML: %d", code)
	}
	for _, path := range []string{"/entities/" + domain.MustKey(rid("s1", "never")), "/entities/NOT=A=KEY", "/entities/"} {
		var e struct{ Status int }
		if code := getJSON(t, s.url+path, &e); code != http.StatusNotFound {
			t.Errorf("%s: %d", path, code)
		}
	}
}

func TestEntityPage_ShowsThePolicyInForceAndTheFleetItsConflicts(t *testing.T) {
	s := startStack(t, web.Config{})
	// Tuesday 23:00 UTC, two weeks on.
	start := nextWeekday(time.Now().UTC().Add(14*24*time.Hour), time.Tuesday).Add(23 * time.Hour)
	id := rid("s1", "c1")
	s.send(t, id, domain.TaskPending, withWindow(start, 2*time.Hour))
	ctx := testenv.Context(t, 10*time.Second)
	kv, err := s.env.JS.KeyValue(ctx, domain.PoliciesBucket)
	if err != nil {
		t.Fatal(err)
	}
	scope := "/subscriptions/s1"
	doc := `{"scope":"` + scope + `","timeZone":"UTC","windows":[{"rrule":"FREQ=WEEKLY;BYDAY=SA,SU","start":"00:00","duration":"24h"}],"minNotice":"72h"}`
	if _, err := kv.Put(ctx, domain.PolicyKey(domain.MustKey(scope)), []byte(doc)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the conflict counted", func() bool { return s.fleet(t, "").Conflicts == 1 })
	var p web.EntityPage
	getJSON(t, s.url+"/entities/"+domain.MustKey(id), &p)
	pv := p.Policy
	if pv == nil || pv.Scope != scope || pv.Level != "subscription" || pv.Document.MinNotice != "72h" || pv.WindowAllowed == nil || *pv.WindowAllowed || pv.Why == "" || len(pv.Next) == 0 {
		t.Fatalf("policy: %+v", pv)
	}
	if err := kv.Delete(ctx, domain.PolicyKey(domain.MustKey(scope))); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the conflict gone with its policy", func() bool { return s.fleet(t, "").Conflicts == 0 })
}

func nextWeekday(t time.Time, d time.Weekday) time.Time {
	t = t.Truncate(24 * time.Hour)
	for t.Weekday() != d {
		t = t.Add(24 * time.Hour)
	}
	return t
}

func TestLive_PagesHearOfAChangeWithinTwoSeconds(t *testing.T) {
	s := startStack(t, web.Config{})
	id := rid("s1", "c1")
	s.send(t, id, domain.TaskPending, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fleet := events(t, ctx, s.url+"/")
	entity := events(t, ctx, s.url+"/entities/"+domain.MustKey(id))
	other := events(t, ctx, s.url+"/entities/"+domain.MustKey(rid("s1", "other")))

	s.send(t, id, domain.TaskEverything, nil)
	within(t, fleet, "change", 2*time.Second)
	within(t, entity, "change", 2*time.Second)
	// A rejected command changes no record, but the entity's history.
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	_, _ = s.cl.Send(sctx, domain.Command{ID: "refused-1", ResourceID: id, Task: domain.TaskNone})
	within(t, entity, "change", 2*time.Second)
	select {
	case ev := <-other:
		t.Errorf("another entity's page heard %q", ev)
	default:
	}
}

func TestConfig_BeyondLoopbackNeedsATokenOrClientCertificates(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("  s3cr3t-t0ken-of-the-view\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(t.TempDir(), "short")
	_ = os.WriteFile(short, []byte("abc"), 0o600)
	env := testenv.Start(t)
	for _, tc := range []struct {
		cfg  web.Config
		want error
	}{
		{web.Config{Listen: "0.0.0.0:8080"}, web.ErrInsecure},
		{web.Config{Listen: ":8080"}, web.ErrInsecure},
		{web.Config{Listen: "10.1.2.3:8080"}, web.ErrInsecure},
		{web.Config{Listen: "[::]:8080"}, web.ErrInsecure},
		{web.Config{Listen: ":8080", TokenFile: short}, web.ErrInvalidConfig},
		{web.Config{Listen: ":8080", TokenFile: filepath.Join(t.TempDir(), "missing")}, web.ErrInvalidConfig},
		{web.Config{Listen: "127.0.0.1:8080", ClientCA: "ca.pem"}, web.ErrInvalidConfig},
		{web.Config{Listen: "nonsense"}, web.ErrInvalidConfig},
		{web.Config{Listen: ":8080", TokenFile: token}, nil},
		{web.Config{Listen: "127.0.0.1:8080"}, nil},
		{web.Config{Listen: "[::1]:8080"}, nil},
		{web.Config{Listen: "localhost:8080"}, nil},
	} {
		_, err := web.New(env.JS, tc.cfg)
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%+v: %v, want %v", tc.cfg, err, tc.want)
		}
	}
}

func TestToken_EveryPageNeedsIt(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	const secret = "s3cr3t-t0ken-of-the-view"
	if err := os.WriteFile(token, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, web.Config{TokenFile: token})
	for _, path := range []string{"/", "/campaigns", "/entities/x"} {
		var e struct{ Status int }
		if code := getJSON(t, s.url+path, &e); code != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d", path, code)
		}
		if code := getJSON(t, s.url+path, &e, "Authorization", "Bearer wrong-token-0123456789"); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d", path, code)
		}
	}
	var p web.FleetPage
	if code := getJSON(t, s.url+"/", &p, "Authorization", "Bearer "+secret); code != http.StatusOK {
		t.Errorf("with the token: %d", code)
	}
	code, b := get(t, s.url+"/?state=pending", "text/html")
	if code != http.StatusUnauthorized || !strings.Contains(string(b), `action="/signin"`) {
		t.Errorf("a browser without the token: %d", code)
	}
	// Signing in sets the cookie and goes back to the page asked for.
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(s.url+"/signin", url.Values{"token": {secret}, "next": {"/?state=pending"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/?state=pending" {
		t.Fatalf("sign-in: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, err = c.Get(s.url + "/?state=pending")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("with the cookie: %d", resp.StatusCode)
	}
	resp, err = c.PostForm(s.url+"/signin", url.Values{"token": {"wrong"}, "next": {"https://elsewhere.example/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token signs in: %d", resp.StatusCode)
	}
}
