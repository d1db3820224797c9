package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"maintsignals/functions/web"
	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// The browser tests drive Debian's headless Chromium through chromedp against a real stack
// (embedded NATS, provisioning, the command function, the view). They skip, saying why, where
// Chromium is missing; axe-core (npm) checks every page for serious and critical
// accessibility violations where its axe.min.js is found (MAINT_AXE, or the cache directory
// that .ci/run installs it into); CI sets both, so there nothing skips. Screenshots go to
// MAINT_ARTIFACTS/<test> when set, else to the test's artifact directory (go test -artifacts).

// axeVersion is the axe-core that .ci/run installs.
const axeVersion = "4.14.1"

func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("MAINT_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "chromium-headless-shell", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("Chromium not found (apt-get install chromium, or set MAINT_CHROMIUM): the browser tests skip")
	return ""
}

// axeScript is axe.min.js, or "" (and the test is told why) when it cannot be found.
func axeScript(t *testing.T) string {
	t.Helper()
	p := os.Getenv("MAINT_AXE")
	if p == "" {
		cache, _ := os.UserCacheDir()
		p = filepath.Join(cache, "maintsignals", "axe-core-"+axeVersion, "node_modules", "axe-core", "axe.min.js")
		if _, err := os.Stat(p); err != nil {
			t.Logf("axe-core not found at %s (npm install --prefix %s axe-core@%s, or set MAINT_AXE): the accessibility checks skip", p, filepath.Dir(filepath.Dir(filepath.Dir(p))), axeVersion)
			return ""
		}
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("MAINT_AXE: %v", err)
	}
	return string(b)
}

func TestAxeVersion_IsTheOneCIInstalls(t *testing.T) {
	b, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\nAXE_VERSION="+axeVersion+"\n") {
		t.Errorf(".ci/run installs another axe-core than %s", axeVersion)
	}
}

func artifacts(t *testing.T) string {
	t.Helper()
	dir := t.ArtifactDir()
	if root := os.Getenv("MAINT_ARTIFACTS"); root != "" {
		dir = filepath.Join(root, t.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// browser is one headless Chromium with a fresh profile and a tab, for one test.
type browser struct {
	t   *testing.T
	ctx context.Context
	axe string
	dir string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	exe := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true), chromedp.WindowSize(1280, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, axe: axeScript(t), dir: artifacts(t)}
	b.do(chromedp.EmulateViewport(1280, 1000))
	return b
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression in the page and decodes its value into T.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript condition until it holds or d passes, and reports how long it
// took.
func (b *browser) waitFor(what, cond string, d time.Duration) time.Duration {
	b.t.Helper()
	start := time.Now()
	for {
		if ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](cond)); err == nil && ok {
			return time.Since(start)
		}
		if time.Since(start) > d {
			html, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
			b.t.Logf("the page: %s", html)
			b.t.Fatalf("%s: not within %s (%s)", what, d, cond)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// violation is a serious or critical accessibility violation axe-core found.
type violation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// accessible checks the page with axe-core: no serious or critical violation.
func (b *browser) accessible(page string) {
	b.t.Helper()
	if b.axe == "" {
		return
	}
	if eval[bool](b, `typeof window.axe === "object"`) == false {
		if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[chromedp.Void](b.axe)); err != nil {
			b.t.Fatalf("inject axe-core: %v", err)
		}
	}
	raw := eval[[]byte](b, `axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(
		r.violations.filter(v => v.impact === "serious" || v.impact === "critical")
		 .map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(" "))}))))`)
	var s string
	var vs []violation
	if err := json.Unmarshal(raw, &s); err != nil || json.Unmarshal([]byte(s), &vs) != nil {
		b.t.Fatalf("axe-core result %s: %v", raw, err)
	}
	for _, v := range vs {
		b.t.Errorf("%s: %s violation %s (%s) at %s", page, v.Impact, v.ID, v.Help, strings.Join(v.Nodes, ", "))
	}
}

// screenshot writes the whole page as name.png among the test's artefacts.
func (b *browser) screenshot(name string) string {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", p)
	return p
}

// quoted is s as a JavaScript string literal.
func quoted(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestBrowser_FleetLiveTimelineAndEntityPage(t *testing.T) {
	b := newBrowser(t)
	s := startStack(t, web.Config{})
	windowStart := time.Now().UTC().Truncate(24 * time.Hour).Add(3*24*time.Hour + 2*time.Hour)
	announced := rid("0b1f6471-1bf0-4dda-aec3-5d1e7a0c0001", "cluster-announced")
	for i := range 12 {
		s.send(t, rid("0b1f6471-1bf0-4dda-aec3-5d1e7a0c0002", fmt.Sprintf("cluster-%02d", i)), []domain.Task{domain.TaskPending, domain.TaskEverything, domain.TaskCustomerActionNeeded, domain.TaskNone}[i%4], nil)
	}
	s.send(t, announced, domain.TaskPending, withWindow(windowStart, 4*time.Hour))
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for i, d := range []int{1, 1, 6, 9, 12} {
		s.send(t, rid("0b1f6471-1bf0-4dda-aec3-5d1e7a0c0003", fmt.Sprintf("cluster-w%d", i)), domain.TaskPending,
			withWindow(today.Add(time.Duration(d)*24*time.Hour+time.Duration(22+i%2)*time.Hour), 4*time.Hour))
	}
	s.send(t, rid("0b1f6471-1bf0-4dda-aec3-5d1e7a0c0003", "cluster-late"), domain.TaskPending, withWindow(today.Add(-30*time.Hour), 4*time.Hour))

	// The view follows the bucket: the last record may reach it a moment after its command's
	// outcome reached the sender.
	testenv.Eventually(t, 5*time.Second, "the view holds the 19 entities", func() bool { return s.fleet(t, "").Entities == 19 })
	b.do(chromedp.Navigate(s.url + "/"))
	b.waitFor("the fleet page", `document.querySelector("#counts") !== null`, 5*time.Second)
	if n := eval[string](b, `document.querySelector('[data-count="all"]').textContent`); n != "19" {
		t.Fatalf("the fleet page counts %s entities, want 19", n)
	}
	// The announced window on its day of the time line, named and linked.
	day := windowStart.Format(time.DateOnly)
	cell := `document.querySelector('.timeline [data-date="` + day + `"]')`
	if got := eval[string](b, cell+`.querySelector("[data-windows]").dataset.windows`); got != "1" {
		t.Errorf("the time line shows %s windows on %s, want 1", got, day)
	}
	if href := eval[string](b, cell+`.querySelector("a").getAttribute("href")`); href != "/entities/"+domain.MustKey(announced) {
		t.Errorf("the window of %s links to %q", day, href)
	}
	if n := eval[string](b, `document.querySelector('[data-count="overdue"]').textContent`); n != "1" {
		t.Errorf("the fleet page counts %s overdue, want 1", n)
	}
	b.accessible("fleet page")
	b.screenshot("fleet")

	// A command sent meanwhile: counts and table change without a reload, within 2 s.
	b.waitFor("the live stream", `document.querySelector(".live-note").textContent.includes("live")`, 5*time.Second)
	b.do(chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	pending := eval[string](b, `document.querySelector('[data-count="Pending"]').textContent`)
	fresh := rid("0b1f6471-1bf0-4dda-aec3-5d1e7a0c0001", "cluster-fresh")
	s.send(t, fresh, domain.TaskPending, nil)
	took := b.waitFor("the new entity on the page", `document.querySelector('[data-count="Pending"]').textContent !== `+quoted(pending)+
		` && document.querySelector('tr[data-key=`+quoted(domain.MustKey(fresh))+`]') !== null`, 2*time.Second)
	t.Logf("the command's effect was on the page %s after its outcome", took.Round(time.Millisecond))
	if !eval[bool](b, `window.notReloaded === true`) {
		t.Error("the page was reloaded")
	}

	// A click leads to the entity page with its history.
	b.do(chromedp.Click(chromedp.CSS(`.timeline [data-date="` + day + `"] a`)))
	b.waitFor("the entity page", `document.querySelector("#history") !== null`, 5*time.Second)
	if loc := eval[string](b, `location.pathname`); loc != "/entities/"+domain.MustKey(announced) {
		t.Fatalf("the click led to %s", loc)
	}
	if row := eval[string](b, `document.querySelector("#history tbody tr").textContent`); !strings.Contains(row, "Pending") || !strings.Contains(row, "applied") {
		t.Errorf("history: %q", row)
	}
	b.accessible("entity page")
	b.screenshot("entity")
	// The entity page follows its entity.
	b.waitFor("the live stream", `document.querySelector(".live-note").textContent.includes("live")`, 5*time.Second)
	s.send(t, announced, domain.TaskEverything, nil)
	b.waitFor("the new state on the entity page", `document.querySelector("[data-state]").dataset.state === "Planned"`+
		` && document.querySelectorAll("#history tbody tr").length === 2`, 2*time.Second)
}

func TestBrowser_TablesAndLinksWorkWithoutJavaScript(t *testing.T) {
	b := newBrowser(t)
	s := startStack(t, web.Config{PageSize: 2})
	for i := range 5 {
		s.send(t, rid("s1", fmt.Sprintf("c%d", i)), []domain.Task{domain.TaskPending, domain.TaskNone}[i%2], nil)
	}
	b.do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	}))
	b.do(chromedp.Navigate(s.url + "/"))
	b.do(chromedp.SetValue(chromedp.CSS("#state"), "Pending"))
	b.do(chromedp.SendKeys(chromedp.CSS("#prefix"), "/subscriptions/s1"))
	if _, err := chromedp.RunResponse(b.ctx, chromedp.Submit(chromedp.CSS("form.filter"))); err != nil {
		t.Fatal(err)
	}
	rows := func() []string {
		v, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#entities tbody tr")].map(r => r.dataset.key)`,
			func(p *runtime.EvaluateParams) {}))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	first := rows()
	if len(first) != 2 || !strings.HasSuffix(first[0], "/c0") || !strings.HasSuffix(first[1], "/c2") {
		t.Fatalf("the filtered first page shows %v", first)
	}
	if _, err := chromedp.RunResponse(b.ctx, chromedp.Click(chromedp.CSS(`a[rel="next"]`))); err != nil {
		t.Fatal(err)
	}
	if next := rows(); len(next) != 1 || !strings.HasSuffix(next[0], "/c4") {
		t.Fatalf("the next page shows %v", next)
	}
	if _, err := chromedp.RunResponse(b.ctx, chromedp.Click(chromedp.CSS(`#entities a`))); err != nil {
		t.Fatal(err)
	}
	if h1 := eval[string](b, `document.querySelector("h1").textContent`); h1 != rid("s1", "c4") {
		t.Errorf("the link led to %q", h1)
	}
}

func TestBrowser_CampaignPagesBurndownMoves(t *testing.T) {
	b := newBrowser(t)
	s := startStack(t, web.Config{})
	b.do(chromedp.Navigate(s.url + "/campaigns"))
	b.waitFor("the campaigns page", `document.querySelector("#campaigns tbody")?.textContent.includes("No campaign.") === true`, 5*time.Second)
	b.accessible("campaigns page, none")

	spec, rej := campaignspec.ParseSpec([]byte(campaignSpec))
	if rej != nil {
		t.Fatal(rej)
	}
	c := campaign.NewCampaign(spec, time.Now().UTC().Add(-time.Hour))
	cs := newCampaignStore(t, s.env.JS)
	cs.putCampaign(c)
	ids := make([]string, 8)
	for i := range ids {
		ids[i] = rid(fmt.Sprintf("s%d", 1+i%2), fmt.Sprintf("c%d", i))
		cs.putEntity(c.ID, ids[i], i%2, campaign.PhaseAnnounced)
	}
	var counts campaign.Counts
	counts.Add(campaign.PhaseAnnounced, len(ids))
	cs.publishEvent(campaign.Event{Campaign: c.ID, Type: campaign.EventCreated, Status: campaign.StatusPlanning, Generation: 1, Phases: counts, At: c.CreatedAt})

	b.do(chromedp.Navigate(s.url + "/campaigns"))
	b.waitFor("the campaign listed", `document.querySelector('tr[data-campaign="pucm-2026-12"] a') !== null`, 5*time.Second)
	b.accessible("campaigns page")
	b.do(chromedp.Click(chromedp.CSS(`tr[data-campaign="pucm-2026-12"] a`)))
	b.waitFor("the campaign page", `document.querySelector("#burndown") !== null`, 5*time.Second)
	b.waitFor("the live stream", `document.querySelector(".live-note").textContent.includes("live")`, 5*time.Second)
	before := eval[string](b, `document.querySelector("polyline.line").getAttribute("points")`)
	for _, id := range ids[:3] {
		cs.putEntity(c.ID, id, 0, campaign.PhaseSucceeded)
	}
	b.waitFor("the burndown moving", `document.querySelector('[data-phase="succeeded"]').textContent === "3"`+
		` && document.querySelector("polyline.line").getAttribute("points") !== `+quoted(before), 2*time.Second)
	b.accessible("campaign page")
	b.screenshot("campaign")
}

func TestBrowser_ACustomerSignsInAndSeesOnlyItsEntities(t *testing.T) {
	b := newBrowser(t)
	s := startTenants(t, web.Config{})
	for i := range 3 {
		s.send(t, rid("s1", fmt.Sprintf("contoso-%d", i)), []domain.Task{domain.TaskPending, domain.TaskEverything, domain.TaskCustomerActionNeeded}[i], nil)
	}
	theirs := rid("s2", "fabrikam-0")
	s.send(t, theirs, domain.TaskPending, nil)
	s.send(t, rid("s10", "other-0"), domain.TaskPending, nil)
	testenv.Eventually(t, 5*time.Second, "the view holds the 5 entities", func() bool {
		var p web.FleetPage
		return getJSON(t, s.url+"/", &p, bearer(operatorToken)...) == http.StatusOK && p.Entities == 5
	})

	// Asked for the fleet without a token, the browser is given the sign-in form.
	b.do(chromedp.Navigate(s.url + "/"))
	b.waitFor("the sign-in form", `document.querySelector("form.signin #token") !== null`, 5*time.Second)
	b.accessible("sign-in page")
	b.do(chromedp.SendKeys(chromedp.CSS("#token"), contosoToken))
	if _, err := chromedp.RunResponse(b.ctx, chromedp.Submit(chromedp.CSS("form.signin"))); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the fleet page", `document.querySelector("#counts") !== null`, 5*time.Second)
	if who := eval[string](b, `document.querySelector("#viewer").textContent`); who != "Signed in as contoso" {
		t.Errorf("the page says %q", who)
	}
	if n := eval[string](b, `document.querySelector('[data-count="all"]').textContent`); n != "3" {
		t.Errorf("the fleet page counts %s entities, want contoso's 3", n)
	}
	keys := eval[[]string](b, `[...document.querySelectorAll("#entities tbody tr")].map(r => r.dataset.key)`)
	if len(keys) != 3 {
		t.Errorf("the table shows %v", keys)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "subscriptions/s1/") {
			t.Errorf("the table shows %s", k)
		}
	}
	if eval[bool](b, `document.querySelector('a[href="/campaigns"]') !== null`) {
		t.Error("a customer's page links the campaigns")
	}
	b.accessible("a customer's fleet page")
	b.screenshot("customer-fleet")

	// Its own entity appears live; another's page is not found.
	b.waitFor("the live stream", `document.querySelector(".live-note").textContent.includes("live")`, 5*time.Second)
	fresh := rid("s1", "contoso-fresh")
	s.send(t, fresh, domain.TaskPending, nil)
	b.waitFor("its new entity on the page", `document.querySelector('[data-count="all"]').textContent === "4"`+
		` && document.querySelector('tr[data-key=`+quoted(domain.MustKey(fresh))+`]') !== null`, 2*time.Second)
	b.do(chromedp.Navigate(s.url + "/entities/" + domain.MustKey(theirs)))
	b.waitFor("the answer for another's entity", `document.querySelector("h1") !== null`, 5*time.Second)
	if h1 := eval[string](b, `document.querySelector("h1").textContent`); h1 != "404" {
		t.Errorf("another's entity page shows %q", h1)
	}
}
