package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"maintsignals/functions/web"
)

// The API's document judged by tools that know nothing of this code: Spectral (npm,
// ruleset spectral:oas), oasdiff (Go, built at a pinned version) against the released v1
// document, and Prism (npm) as a validating proxy in front of a running stack while every
// operation is fuzzed (fuzz_test.go). Each test skips, saying why, where its tool is not
// found; .ci/run installs them and names them (MAINT_SPECTRAL, MAINT_OASDIFF, MAINT_PRISM), so
// that in CI a missing tool fails instead.

// The tools' versions, as .ci/run installs them.
const (
	spectralVersion = "6.16.3"
	prismVersion    = "5.16.0"
	oasdiffVersion  = "v1.37.0"
)

// tool is the path of a tool: env's value (which must exist), else where .ci/run caches it;
// the test skips when it is in neither.
func tool(t *testing.T, env, cached, install string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", env, p, err)
		}
		return p
	}
	cache, _ := os.UserCacheDir()
	p := filepath.Join(cache, "maintsignals", cached)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s not found at %s (%s, or set %s): this check skips", filepath.Base(p), p, install, env)
	}
	return p
}

func TestDocument_IsTheCommittedOne(t *testing.T) {
	b, err := web.Document()
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, committed) {
		t.Error("infra/api/openapi.json is not the document the code builds: run go run ./infra/api")
	}
}

func TestToolVersions_AreTheOnesCIInstalls(t *testing.T) {
	b, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"SPECTRAL_VERSION=" + spectralVersion, "PRISM_VERSION=" + prismVersion, "OASDIFF_VERSION=" + oasdiffVersion} {
		if !strings.Contains(string(b), "\n"+line+"\n") {
			t.Errorf(".ci/run does not set %s", line)
		}
	}
}

func TestSpectral_FindsNoErrorInTheDocumentAndOneInADamagedCopy(t *testing.T) {
	spectral := tool(t, "MAINT_SPECTRAL", "spectral-"+spectralVersion+"/node_modules/.bin/spectral",
		"npm install --prefix ~/.cache/maintsignals/spectral-"+spectralVersion+" @stoplight/spectral-cli@"+spectralVersion)
	for _, tc := range []struct {
		name   string
		damage func(doc map[string]any)
		ok     bool
	}{
		{"the document", func(map[string]any) {}, true},
		{"an operationId twice", func(doc map[string]any) {
			get := doc["paths"].(map[string]any)["/api/v1/policies"].(map[string]any)["get"].(map[string]any)
			get["operationId"] = "getEntity"
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := damaged(t, tc.damage)
			out, err := exec.Command(spectral, "lint", "--ruleset", ".spectral.yaml", "--fail-severity", "error", p).CombinedOutput()
			if (err == nil) != tc.ok {
				t.Errorf("spectral lint passed %v, want %v: %v\n%s", err == nil, tc.ok, err, out)
			}
		})
	}
}

// damaged writes the document, changed by damage, to a file of the test's.
func damaged(t *testing.T, damage func(doc map[string]any)) string {
	t.Helper()
	b, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	damage(doc)
	b, _ = json.Marshal(doc)
	p := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// oasdiff runs oasdiff breaking from the released document to doc.
func oasdiff(t *testing.T, doc string) ([]byte, error) {
	t.Helper()
	bin := tool(t, "MAINT_OASDIFF", "oasdiff-"+oasdiffVersion+"/oasdiff",
		"GOBIN=~/.cache/maintsignals/oasdiff-"+oasdiffVersion+" go install github.com/oasdiff/oasdiff@"+oasdiffVersion)
	return exec.Command(bin, "breaking", "released/v1.json", doc, "--fail-on", "ERR").CombinedOutput()
}

func TestOasdiff_FindsNoBreakingChangeSinceTheRelease(t *testing.T) {
	if out, err := oasdiff(t, "openapi.json"); err != nil {
		t.Errorf("oasdiff breaking released/v1.json openapi.json: %v\n%s", err, out)
	}
}

// The check refuses what would break a client: a field it reads gone, an operation gone.
func TestOasdiff_RefusesABreakingChange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(doc map[string]any)
	}{
		{"a record's field removed", func(doc map[string]any) {
			rec := doc["components"].(map[string]any)["schemas"].(map[string]any)["Record"].(map[string]any)
			delete(rec["properties"].(map[string]any), "state")
			rec["required"] = []any{"key"}
		}},
		{"an operation removed", func(doc map[string]any) {
			delete(doc["paths"].(map[string]any), "/api/v1/policies")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out, err := oasdiff(t, damaged(t, tc.damage)); err == nil {
				t.Errorf("oasdiff let a breaking change through:\n%s", out)
			}
		})
	}
}

// Every problem type the API answers has its entry in the integrators' documentation.
func TestProblemTypes_AreDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/integrating.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range web.ProblemCodes() {
		entry := `<a id="problem-` + strings.ToLower(string(code)) + `"></a>` + "`" + string(code) + "`"
		if !strings.Contains(string(b), entry) {
			t.Errorf("infra/docs/integrating.md has no entry for %s%s", web.ProblemBase, code)
		}
	}
}
