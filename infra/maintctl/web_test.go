package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"maintsignals/functions/web"
	"maintsignals/test/testenv"
)

var webRE = regexp.MustCompile(`web: (http://\S+)`)

// fleetJSON reads the fleet page of the view at url.
func fleetJSON(t *testing.T, url string) (int, web.FleetPage) { return fleetPage(t, url, "") }

func TestUp_ServesTheWebView(t *testing.T) {
	c := newCLI(t, nil)
	port := testenv.FreePort(t)
	u := startUpInProcess(t, c, 20*time.Second, "up", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--metrics-listen", "",
		"--web-listen", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	m := webRE.FindStringSubmatch(u.out.String())
	if m == nil {
		t.Fatalf("up did not say where the web view is:\n%s", u.out)
	}
	c.env["NATS_URL"] = listenRE.FindStringSubmatch(u.out.String())[1]
	c.ok("pending", testID)
	testenv.Eventually(t, 5*time.Second, "the command on the fleet page", func() bool {
		code, p := fleetJSON(t, m[1])
		return code == http.StatusOK && p.Entities == 1 && len(p.Rows) == 1 && p.Rows[0].ResourceID == testID
	})
	mustContain(t, "up output", u.out.String(), "functions: command, emitter, notices, webhook, policies, web")
	if r := u.stop(); r.err != nil {
		t.Errorf("up: %v", r.err)
	}
}

func TestUp_WebListen(t *testing.T) {
	c := newCLI(t, nil)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	t.Run("an explicit address that cannot be bound is an error", func(t *testing.T) {
		r := c.run("up", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--metrics-listen", "", "--web-listen", taken.Addr().String())
		if r.err == nil || !strings.Contains(r.err.Error(), "--web-listen") {
			t.Errorf("up with the web port in use: %v", r.err)
		}
	})
	t.Run("beyond loopback without a token is refused", func(t *testing.T) {
		r := c.run("up", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--metrics-listen", "", "--web-listen", "0.0.0.0:0")
		if r.err == nil || !strings.Contains(r.err.Error(), "--web-token-file") {
			t.Errorf("up serving the view to the network without a token: %v", r.err)
		}
	})
	t.Run("empty turns it off", func(t *testing.T) {
		u := startUpInProcess(t, c, 20*time.Second, "up", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--metrics-listen", "", "--web-listen=")
		if strings.Contains(u.out.String(), "web: ") {
			t.Errorf("up with --web-listen= serves a view:\n%s", u.out)
		}
		u.stop()
	})
	t.Run("the default address taken: up runs without the view", func(t *testing.T) {
		// Hold the default address, unless something else does already: either way it is taken.
		if ln, err := net.Listen("tcp", web.DefaultListen); err == nil {
			defer ln.Close()
		}
		u := startUpInProcess(t, c, 20*time.Second, "up", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--metrics-listen", "")
		mustContain(t, "up's log", u.errOut.String(), "the web view's default address is taken; running without the web view")
		if strings.Contains(u.out.String(), "web: http") {
			t.Errorf("up serves a view on a taken address:\n%s", u.out)
		}
		if r := u.stop(); r.err != nil {
			t.Errorf("up: %v", r.err)
		}
	})
}

func TestUp_WebTokens(t *testing.T) {
	c := newCLI(t, nil)
	write := func(name, body string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const contoso, operator = "contoso-0123456789abcdef", "operator-0123456789abcdef"
	t.Run("a bad file stops up, naming the flag and the field", func(t *testing.T) {
		bad := write("bad.json", `[{"name":"contoso","token":"`+contoso+`","scopes":["/subscriptions/0b1f/resourceGroups"]}]`)
		r := c.run("up", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--metrics-listen", "", "--web-tokens", bad)
		if r.err == nil || !strings.Contains(r.err.Error(), "--web-tokens") || !strings.Contains(r.err.Error(), "InvalidParameter ([0].scopes[0])") {
			t.Errorf("up with a bad tokens file: %v", r.err)
		}
	})
	t.Run("each token sees its own", func(t *testing.T) {
		tokens := write("tokens.json", `[{"name":"contoso","token":"`+contoso+`","scopes":["/subscriptions/0b1f"]}]`)
		u := startUpInProcess(t, c, 20*time.Second, "up", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--metrics-listen", "",
			"--web-listen", net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t))),
			"--web-token-file", write("token", operator), "--web-tokens", tokens)
		m := webRE.FindStringSubmatch(u.out.String())
		if m == nil {
			t.Fatalf("up did not say where the web view is:\n%s", u.out)
		}
		c.env["NATS_URL"] = listenRE.FindStringSubmatch(u.out.String())[1]
		c.ok("pending", testID)
		c.ok("pending", strings.Replace(testID, "0b1f", "0b2f", 1))
		entities := func(token string) int {
			req, _ := http.NewRequest(http.MethodGet, m[1]+"/", nil)
			req.Header.Set("Accept", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var p web.FleetPage
			if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&p) != nil {
				return -resp.StatusCode
			}
			return p.Entities
		}
		testenv.Eventually(t, 5*time.Second, "both on the operator's fleet page", func() bool { return entities(operator) == 2 })
		if n := entities(contoso); n != 1 {
			t.Errorf("contoso sees %d entities, want 1", n)
		}
		if n := entities("wrong-0123456789abcdef"); n != -http.StatusUnauthorized {
			t.Errorf("a wrong token: %d", n)
		}
		if r := u.stop(); r.err != nil {
			t.Errorf("up: %v", r.err)
		}
	})
}

func TestFunctionWeb_RefusesTheNetworkWithoutAToken(t *testing.T) {
	env := testenv.StartListening(t)
	c := newCLI(t, nil)
	c.env["NATS_URL"] = env.Server.URL()
	r := c.run("function", "web", "--web-listen", ":0")
	if r.err == nil || !strings.Contains(r.err.Error(), "refusing to serve the web view beyond loopback") {
		t.Errorf("function web on every interface without a token: %v", r.err)
	}
}

func TestFunctionWeb_ReadyOnceItHasReadTheFleet(t *testing.T) {
	env := testenv.StartListening(t)
	c := newCLI(t, nil)
	c.env["NATS_URL"] = env.Server.URL()
	webAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t)))
	adminAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() { done <- c.runCtx(ctx, "function", "web", "--web-listen", webAddr, "--admin-listen", adminAddr) }()
	testenv.Eventually(t, 15*time.Second, "the web function ready", func() bool {
		resp, err := http.Get("http://" + adminAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if code, p := fleetJSON(t, "http://"+webAddr); code != http.StatusOK || p.Entities != 0 {
		t.Errorf("fleet page of an empty fleet: %d %+v", code, p)
	}
	cancel()
	if r := <-done; r.err != nil {
		t.Errorf("function web: %v\n%s", r.err, r.stderr)
	}
}
