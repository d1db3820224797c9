package testenv

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// Prometheus 3, for the tests that query what our OTLP became. It is built, not packaged
// (Debian ships 2.x): .ci/run and `task prometheus` run
//
//	GOBIN=<cache>/prometheus-<version> go install github.com/prometheus/prometheus/cmd/prometheus@<version>
const (
	PrometheusVersion = "v0.316.0"
	// EnvPrometheus names a prometheus 3.x binary; it wins over the cache and PATH.
	EnvPrometheus = "MAINT_PROMETHEUS"
)

// PrometheusCachePath is where .ci/run and `task prometheus` put the binary:
// $XDG_CACHE_HOME (or ~/.cache)/maintsignals/prometheus-<version>/prometheus.
func PrometheusCachePath() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "maintsignals", "prometheus-"+PrometheusVersion, "prometheus")
}

var (
	errNotPrometheus3 = errors.New("not Prometheus 3")
	errNoPrometheus3  = errors.New("no Prometheus 3.x binary found")
)

// FindPrometheus3 returns the path of a Prometheus 3.x binary: MAINT_PROMETHEUS (an error if
// that is not one), else the cache path, else `prometheus` on PATH when it is 3.x.
func FindPrometheus3() (string, error) {
	if p := os.Getenv(EnvPrometheus); p != "" {
		if err := isPrometheus3(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvPrometheus, p, err)
		}
		return p, nil
	}
	var tried []string
	if p := PrometheusCachePath(); p != "" {
		if err := isPrometheus3(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	if p, err := exec.LookPath("prometheus"); err == nil {
		err := isPrometheus3(p)
		if err == nil {
			return p, nil
		}
		tried = append(tried, fmt.Sprintf("%s (%v)", p, err))
	}
	return "", fmt.Errorf("%w (tried %s; %s is unset): build one with "+
		"`GOBIN=%s go install github.com/prometheus/prometheus/cmd/prometheus@%s` (or `task prometheus`)",
		errNoPrometheus3, strings.Join(append(tried, "prometheus on PATH"), ", "), EnvPrometheus, filepath.Dir(PrometheusCachePath()), PrometheusVersion)
}

var (
	releaseRE = regexp.MustCompile(`prometheus, version (\d+)\.`)
	// Go module versions v0.3xx.y are the 3.x releases.
	moduleRE = regexp.MustCompile(`^v0\.(\d+)\.\d+`)
)

// isPrometheus3 checks the major version: a release build says it in --version; a binary
// built with go install says nothing there, and its module version (v0.3xx) tells.
func isPrometheus3(path string) error {
	if _, err := os.Stat(path); err != nil {
		return err
	}
	if bi, err := buildinfo.ReadFile(path); err == nil && bi.Main.Path == "github.com/prometheus/prometheus" {
		if m := moduleRE.FindStringSubmatch(bi.Main.Version); m != nil {
			if n, _ := strconv.Atoi(m[1]); n >= 300 && n < 400 {
				return nil
			}
		}
	}
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %w", path, err)
	}
	if m := releaseRE.FindSubmatch(out); m != nil && string(m[1]) == "3" {
		return nil
	}
	return fmt.Errorf("%w: %s", errNotPrometheus3, strings.SplitN(string(out), "\n", 2)[0])
}

// Prometheus is a running Prometheus 3 with its OTLP receiver on, on loopback, storing in the
// test's temporary directory.
type Prometheus struct {
	URL string
	API promv1.API
}

// OTLPEndpoint is the base URL for OTEL_EXPORTER_OTLP_ENDPOINT (over http/protobuf the
// exporter appends /v1/metrics).
func (p *Prometheus) OTLPEndpoint() string { return p.URL + "/api/v1/otlp" }

// StartPrometheus starts Prometheus 3, or skips the test, saying how to get one, when none is
// found. It is killed at cleanup.
func StartPrometheus(t testing.TB) *Prometheus {
	t.Helper()
	bin, err := FindPrometheus3()
	switch {
	case errors.Is(err, errNoPrometheus3):
		t.Skip(err.Error())
	case err != nil:
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	// No scrape targets: everything arrives over OTLP.
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 15s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	proc := StartProc(t, "prometheus", exec.Command(bin,
		"--config.file="+cfg,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--web.enable-otlp-receiver",
	))
	p := &Prometheus{URL: "http://" + addr}
	client, err := promapi.NewClient(promapi.Config{Address: p.URL})
	if err != nil {
		t.Fatal(err)
	}
	p.API = promv1.NewAPI(client)
	deadline := time.Now().Add(60 * time.Second)
	for !p.ready() {
		select {
		case <-proc.Exited():
			t.Fatalf("prometheus exited (%v):\n%s", proc.WaitErr(), Tail(proc.ErrPath, 40))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready within a minute:\n%s", Tail(proc.ErrPath, 40))
		}
	}
	return p
}

func (p *Prometheus) ready() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/-/ready", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
