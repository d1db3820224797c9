package k8s

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The lines an overlay carries, commented out, to ship the dashboards; enabling them is
// uncommenting them.
const (
	dashboardsCommented = "# components:\n#   - ../../components/dashboards\n"
	dashboardsEnabled   = "components:\n  - ../../components/dashboards\n"
)

// renderWithDashboards renders overlay with the dashboards component enabled as its comment
// says: a copy of the overlay, beside it, with those lines uncommented.
func renderWithDashboards(t *testing.T, kubectl, overlay string) []byte {
	t.Helper()
	src := filepath.Join("overlays", overlay)
	k, err := os.ReadFile(filepath.Join(src, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(k, []byte(dashboardsCommented)) {
		t.Fatalf("overlays/%s/kustomization.yaml does not carry the dashboards component, commented out:\n%s", overlay, dashboardsCommented)
	}
	dir, err := os.MkdirTemp("overlays", "dashboards-check-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	files, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(src, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if f.Name() == "kustomization.yaml" {
			b = bytes.Replace(b, []byte(dashboardsCommented), []byte(dashboardsEnabled), 1)
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize overlays/%s with the dashboards: %v: %s", overlay, err, stderr.String())
	}
	return out
}

// TestDashboardsComponent renders each overlay with the dashboards component enabled: it adds
// one ConfigMap per committed dashboard, labelled for Grafana's sidecar, in the overlay's
// namespace, holding the committed JSON byte for byte, and changes nothing else. Without it,
// the overlays ship no dashboard.
func TestDashboardsComponent(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not found: the dashboards component needs kubectl kustomize")
	}
	jsonFiles, err := filepath.Glob("../dashboards/*.json")
	if err != nil || len(jsonFiles) == 0 {
		t.Fatalf("no dashboards in ../dashboards: %v", err)
	}
	for _, overlay := range overlays {
		t.Run(overlay, func(t *testing.T) {
			plain := decodeDocs(t, overlay, render(t, overlay))
			with := decodeDocs(t, overlay, renderWithDashboards(t, kubectl, overlay))
			var shipped []string
			for name, cm := range with.configMaps {
				if _, ok := plain.configMaps[name]; ok {
					continue
				}
				checkDashboardConfigMap(t, cm)
				for file := range cm.Data {
					shipped = append(shipped, file)
				}
			}
			for name, cm := range plain.configMaps {
				if cm.Labels["grafana_dashboard"] != "" {
					t.Errorf("without the component, overlays/%s ships dashboard %s", overlay, name)
				}
			}
			var want []string
			for _, f := range jsonFiles {
				want = append(want, filepath.Base(f))
			}
			slices.Sort(shipped)
			if !slices.Equal(shipped, want) {
				t.Errorf("the component ships %v; infra/dashboards has %v (add a new dashboard to infra/dashboards/kustomization.yaml)", shipped, want)
			}
			if len(with.deployments) != len(plain.deployments) || len(with.jobs) != len(plain.jobs) ||
				len(with.scaledObjects) != len(plain.scaledObjects) || len(with.pdbs) != len(plain.pdbs) ||
				len(with.configMaps) != len(plain.configMaps)+len(want) {
				t.Errorf("the component changes more than the dashboards' ConfigMaps")
			}
		})
	}
}

func checkDashboardConfigMap(t *testing.T, cm *corev1.ConfigMap) {
	t.Helper()
	if cm.Namespace != "maintsignals" {
		t.Errorf("%s is in namespace %q, not the overlay's", cm.Name, cm.Namespace)
	}
	if cm.Labels["grafana_dashboard"] != "1" || cm.Labels["app.kubernetes.io/name"] != "maintsignals" {
		t.Errorf("%s: labels %v, want grafana_dashboard: \"1\" for the sidecar", cm.Name, cm.Labels)
	}
	if !strings.HasPrefix(cm.Name, "maint-dashboard-") {
		t.Errorf("%s: a stable name without a hash suffix, maint-dashboard-…, expected", cm.Name)
	}
	if len(cm.Data) != 1 {
		t.Errorf("%s holds %d files, want one dashboard", cm.Name, len(cm.Data))
	}
	for file, body := range cm.Data {
		committed, err := os.ReadFile(filepath.Join("..", "dashboards", file))
		if err != nil {
			t.Errorf("%s holds %s, which infra/dashboards does not have: %v", cm.Name, file, err)
			continue
		}
		if body != string(committed) {
			t.Errorf("%s: %s differs from the committed infra/dashboards/%s", cm.Name, file, file)
		}
	}
}
