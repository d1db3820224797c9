package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"maintsignals/test/testenv"
)

func TestVersion(t *testing.T) {
	c := newCLI(t, nil)
	out := c.ok("version")
	if !strings.HasPrefix(out, "maintctl ") || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("version = %q", out)
	}
	var v versionInfo
	if err := json.Unmarshal([]byte(c.ok("version", "-o", "json")), &v); err != nil || v.GoVersion != runtime.Version() || v.Version == "" {
		t.Fatalf("version -o json = %+v, %v", v, err)
	}
	if r := c.run("version", "extra"); r.err == nil {
		t.Fatal("version took an argument")
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var monitorRE = regexp.MustCompile(`NATS monitoring on (http://\S+)`)

func TestUp_MonitorListenServesWhatKEDAReads(t *testing.T) {
	c := newCLI(t, nil)
	u := startUpInProcess(t, c, 30*time.Second, "up", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--metrics-listen", "", "--monitor-listen", "127.0.0.1:0")
	m := monitorRE.FindStringSubmatch(u.out.String())
	if m == nil {
		t.Fatalf("up did not print the monitoring endpoint:\n%s", u.out)
	}
	code, body := httpGet(t, m[1]+"/jsz?acc=$G&config=true&consumers=true")
	if code != http.StatusOK || !strings.Contains(body, `"name": "command-p0"`) || !strings.Contains(body, `"num_pending"`) {
		t.Fatalf("jsz = %d:\n%.2000s", code, body)
	}
	if code, _ := httpGet(t, m[1]+"/healthz?js-enabled-only=true"); code != http.StatusOK {
		t.Fatalf("healthz = %d", code)
	}
	if r := u.stop(); r.err != nil {
		t.Fatal(r.err)
	}
}

func TestUp_MonitorListenRefusesABadAddress(t *testing.T) {
	c := newCLI(t, nil)
	r := c.run("up", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--metrics-listen", "", "--monitor-listen", "8222")
	if r.err == nil || !strings.Contains(r.err.Error(), "--monitor-listen") {
		t.Fatalf("err = %v, want --monitor-listen named", r.err)
	}
}

func TestFunction_AdminListen(t *testing.T) {
	s := startStack(t, stackOpts{noFunction: true})
	c := newCLI(t, s)
	admin := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() { done <- c.runCtx(ctx, "function", "command", "--admin-listen", admin) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if resp, err := http.Get("http://" + admin + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("function command never ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := httpGet(t, "http://"+admin+"/livez"); code != http.StatusOK || strings.TrimSpace(body) != "alive" {
		t.Fatalf("livez = %d %q", code, body)
	}
	// A second replica on the same admin address fails at once, saying which flag.
	r := c.run("function", "emitter", "--admin-listen", admin)
	if r.err == nil || !strings.Contains(r.err.Error(), "--admin-listen") {
		t.Fatalf("second admin on %s: %v", admin, r.err)
	}
	cancel() // SIGTERM
	if r := <-done; r.err != nil {
		t.Fatalf("function command: %v\n%s", r.err, r.stderr)
	}
	if conn, err := net.Dial("tcp", admin); err == nil {
		conn.Close()
		t.Fatal("the admin endpoint still listens after the function stopped")
	}
}
