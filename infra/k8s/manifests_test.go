package k8s

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"maintsignals/infra/image/imagebuild"
	"maintsignals/infra/provision"
	"maintsignals/infra/registry"
	"maintsignals/shared/domain"
)

// ScaledObject is the part of KEDA's keda.sh/v1alpha1 ScaledObject these manifests use,
// decoded strictly: a field KEDA does not know (or one this project does not use) fails.
type ScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ScaledObjectSpec `json:"spec"`
}

type ScaledObjectSpec struct {
	ScaleTargetRef struct {
		Name       string `json:"name"`
		Kind       string `json:"kind,omitempty"`
		APIVersion string `json:"apiVersion,omitempty"`
	} `json:"scaleTargetRef"`
	PollingInterval  *int32 `json:"pollingInterval,omitempty"`
	CooldownPeriod   *int32 `json:"cooldownPeriod,omitempty"`
	IdleReplicaCount *int32 `json:"idleReplicaCount,omitempty"`
	MinReplicaCount  *int32 `json:"minReplicaCount,omitempty"`
	MaxReplicaCount  *int32 `json:"maxReplicaCount,omitempty"`
	Fallback         *struct {
		FailureThreshold int32 `json:"failureThreshold"`
		Replicas         int32 `json:"replicas"`
	} `json:"fallback,omitempty"`
	Advanced *struct {
		HorizontalPodAutoscalerConfig *struct {
			Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
		} `json:"horizontalPodAutoscalerConfig,omitempty"`
	} `json:"advanced,omitempty"`
	Triggers []Trigger `json:"triggers"`
}

type Trigger struct {
	Type     string            `json:"type"`
	Name     string            `json:"name,omitempty"`
	Metadata map[string]string `json:"metadata"`
}

// natsTriggerKeys are the metadata keys of KEDA's nats-jetstream scaler.
var natsTriggerKeys = []string{"natsServerMonitoringEndpoint", "account", "stream", "consumer", "lagThreshold", "activationLagThreshold", "useHttps"}

// rendered is one overlay, decoded.
type rendered struct {
	name          string
	configMaps    map[string]*corev1.ConfigMap
	namespaces    []*corev1.Namespace
	deployments   map[string]*appsv1.Deployment
	jobs          map[string]*batchv1.Job
	pdbs          []*policyv1.PodDisruptionBudget
	scaledObjects []*ScaledObject
	services      []*corev1.Service
}

var overlays = []string{"dev", "prod"}

// render renders an overlay with kubectl kustomize; without kubectl, the base's files as they
// are (the overlays' patches are then not applied, and the test says so).
func render(t *testing.T, overlay string) []byte {
	t.Helper()
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		var stderr bytes.Buffer
		cmd := exec.Command(kubectl, "kustomize", filepath.Join("overlays", overlay))
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl kustomize overlays/%s: %v: %s", overlay, err, stderr.String())
		}
		return out
	}
	// The dev overlay adds only a namespace and a smaller maximum to the base.
	if overlay != "dev" {
		t.Skipf("kubectl not found: the %s overlay's patches need kubectl kustomize; checking dev from the base's files only", overlay)
	}
	t.Logf("kubectl not found: checking the base's files without the %s overlay's patches", overlay)
	var k struct {
		Resources []string `json:"resources"`
	}
	raw, err := os.ReadFile("base/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatal(err)
	}
	var all bytes.Buffer
	for _, r := range append([]string{"../overlays/" + overlay + "/namespace.yaml"}, k.Resources...) {
		b, err := os.ReadFile(filepath.Join("base", r))
		if err != nil {
			t.Fatal(err)
		}
		all.WriteString("---\n")
		all.Write(b)
		all.WriteString("\n")
	}
	return all.Bytes()
}

var decoder = func() k8sruntime.Decoder {
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}()

// documents splits a YAML stream into its non-empty documents.
func documents(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufioReader(data))
	var docs [][]byte
	for {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
}

// decodeStrict decodes one document into its Kubernetes type, or the local ScaledObject; an
// unknown kind, an unknown or misspelt field, or a duplicate field is an error.
func decodeStrict(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	if tm.APIVersion == "keda.sh/v1alpha1" && tm.Kind == "ScaledObject" {
		var so ScaledObject
		if err := yaml.UnmarshalStrict(doc, &so); err != nil {
			return nil, fmt.Errorf("ScaledObject: %w", err)
		}
		return &so, nil
	}
	obj, _, err := decoder.Decode(doc, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
	}
	return obj, nil
}

func decodeOverlay(t *testing.T, overlay string) *rendered {
	t.Helper()
	return decodeDocs(t, overlay, render(t, overlay))
}

// decodeDocs decodes what an overlay rendered.
func decodeDocs(t *testing.T, overlay string, data []byte) *rendered {
	t.Helper()
	docs, err := documents(data)
	if err != nil {
		t.Fatal(err)
	}
	r := &rendered{name: overlay, configMaps: map[string]*corev1.ConfigMap{}, deployments: map[string]*appsv1.Deployment{}, jobs: map[string]*batchv1.Job{}}
	for _, d := range docs {
		obj, err := decodeStrict(d)
		if err != nil {
			t.Fatalf("overlays/%s: %v", overlay, err)
		}
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			r.configMaps[o.Name] = o
		case *corev1.Namespace:
			r.namespaces = append(r.namespaces, o)
		case *appsv1.Deployment:
			r.deployments[o.Name] = o
		case *batchv1.Job:
			r.jobs[o.Name] = o
		case *policyv1.PodDisruptionBudget:
			r.pdbs = append(r.pdbs, o)
		case *corev1.Service:
			r.services = append(r.services, o)
		case *ScaledObject:
			r.scaledObjects = append(r.scaledObjects, o)
		default:
			t.Fatalf("overlays/%s: unexpected object %T", overlay, obj)
		}
	}
	return r
}

func TestStrictDecodingRefusesUnknownFields(t *testing.T) {
	docs, err := documents(render(t, "dev"))
	if err != nil {
		t.Fatal(err)
	}
	var deploy, so []byte
	for _, d := range docs {
		switch {
		case bytes.Contains(d, []byte("kind: Deployment")) && deploy == nil:
			deploy = d
		case bytes.Contains(d, []byte("kind: ScaledObject")) && so == nil:
			so = d
		}
	}
	if _, err := decodeStrict(deploy); err != nil {
		t.Fatalf("the rendered Deployment does not decode: %v", err)
	}
	if _, err := decodeStrict(bytes.Replace(deploy, []byte("readinessProbe:"), []byte("readinesProbe:"), 1)); err == nil || !strings.Contains(err.Error(), "readinesProbe") {
		t.Fatalf("a misspelt Deployment field: err = %v, want it named", err)
	}
	if _, err := decodeStrict(bytes.Replace(so, []byte("minReplicaCount:"), []byte("minReplicas:"), 1)); err == nil || !strings.Contains(err.Error(), "minReplicas") {
		t.Fatalf("a misspelt ScaledObject field: err = %v, want it named", err)
	}
	if _, err := decodeStrict([]byte("apiVersion: keda.sh/v1alpha1\nkind: TriggerAuthentication\nmetadata:\n  name: x\n")); err == nil {
		t.Fatal("a kind this deployment does not use decoded")
	}
}

// args returns the value of --name in args ("" when absent), in both "--name v" and
// "--name=v" forms.
func argValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// provisionConfig is the provisioning the Job of an overlay runs.
func provisionConfig(t *testing.T, r *rendered) provision.Config {
	t.Helper()
	job := r.jobs["maint-provision"]
	if job == nil {
		t.Fatalf("overlays/%s: no maint-provision Job", r.name)
	}
	args := job.Spec.Template.Spec.Containers[0].Args
	if len(args) == 0 || args[0] != "provision" {
		t.Fatalf("overlays/%s: provisioning Job runs %q, want maintctl provision", r.name, args)
	}
	c := provision.DefaultConfig()
	for _, f := range []struct {
		name string
		dst  *int
	}{{"--replicas", &c.Replicas}, {"--partitions", &c.Partitions}, {"--emitter-shards", &c.Shards}} {
		if v, ok := argValue(args, f.name); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("overlays/%s: provisioning %s %q", r.name, f.name, v)
			}
			*f.dst = n
		}
	}
	if v, ok := argValue(args, "--tick"); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		c.Tick = d
	}
	c.Webhooks = slices.Contains(args, "--webhooks")
	return c
}

// consumersOf lists the consumers provisioning creates for each function.
func consumersOf(t *testing.T, c provision.Config) map[string][]registry.Consumer {
	t.Helper()
	c, err := c.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]registry.Consumer{}
	for _, f := range registry.Functions() {
		if f.Consumers != nil {
			out[f.Name] = f.Consumers(c.Topology())
		}
	}
	return out
}

// chartValues is the part of the official NATS chart's values these files set, strictly.
type chartValues struct {
	Config struct {
		Cluster struct {
			Enabled  bool `json:"enabled"`
			Replicas int  `json:"replicas,omitempty"`
		} `json:"cluster"`
		JetStream struct {
			Enabled   bool `json:"enabled"`
			FileStore struct {
				Enabled bool   `json:"enabled"`
				Dir     string `json:"dir"`
				PVC     struct {
					Enabled bool   `json:"enabled"`
					Size    string `json:"size"`
				} `json:"pvc"`
			} `json:"fileStore"`
		} `json:"jetstream"`
		Monitor struct {
			Enabled bool `json:"enabled"`
			Port    int  `json:"port"`
		} `json:"monitor"`
		Merge map[string]any `json:"merge"`
	} `json:"config"`
}

func readChartValues(t *testing.T, overlay string) chartValues {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("nats", "values-"+overlay+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v chartValues
	if err := yaml.UnmarshalStrict(raw, &v); err != nil {
		t.Fatalf("nats/values-%s.yaml: %v", overlay, err)
	}
	return v
}

func TestManifestInvariants(t *testing.T) {
	for _, overlay := range overlays {
		t.Run(overlay, func(t *testing.T) {
			r := decodeOverlay(t, overlay)
			pc := provisionConfig(t, r)
			values := readChartValues(t, overlay)
			checkChart(t, overlay, values, pc)
			checkPods(t, r, pc)
			checkSelectors(t, r)
			checkScaling(t, r, pc, values)
		})
	}
}

func checkChart(t *testing.T, overlay string, v chartValues, pc provision.Config) {
	t.Helper()
	nodes := 1
	if v.Config.Cluster.Enabled {
		nodes = v.Config.Cluster.Replicas
	}
	want := map[string]int{"dev": 1, "prod": 3}[overlay]
	if nodes != want {
		t.Errorf("chart values: %d NATS nodes, want %d for %s", nodes, want, overlay)
	}
	if pc.Replicas != nodes {
		t.Errorf("provisioning --replicas %d on a %d-node NATS", pc.Replicas, nodes)
	}
	if !v.Config.JetStream.Enabled || !v.Config.JetStream.FileStore.Enabled || !v.Config.JetStream.FileStore.PVC.Enabled {
		t.Error("chart values: JetStream must be on, with a file store on a persistent volume")
	}
	if !v.Config.Monitor.Enabled || v.Config.Monitor.Port != 8222 {
		t.Errorf("chart values: monitoring %v on %d, want on 8222", v.Config.Monitor.Enabled, v.Config.Monitor.Port)
	}
}

// deploymentOf names the Deployment of a function.
func deploymentOf(f registry.Function) string { return "maint-" + f.Name }

func checkPods(t *testing.T, r *rendered, pc provision.Config) {
	t.Helper()
	// One Deployment per function of the registry, and no other.
	for _, f := range registry.Functions() {
		if r.deployments[deploymentOf(f)] == nil {
			t.Errorf("overlays/%s: function %s has no Deployment %s (see Adding a function in infra/docs/contributing.md)", r.name, f.Name, deploymentOf(f))
		}
	}
	for n := range r.deployments {
		if _, ok := registry.Lookup(strings.TrimPrefix(n, "maint-")); !ok {
			t.Errorf("overlays/%s: Deployment %s runs no function of the registry", r.name, n)
		}
	}
	// Each function reads streams that provisioning makes only when asked (the webhook feed).
	provisioned := map[string]bool{}
	for _, sc := range provision.Streams(pc) {
		provisioned[sc.Name] = true
	}
	for _, f := range registry.Functions() {
		for _, s := range f.Streams() {
			if !provisioned[s] {
				t.Errorf("overlays/%s: function %s is deployed but the provisioning Job does not make stream %s (for %s: --webhooks)", r.name, f.Name, s, domain.WebhookStream)
			}
		}
	}
	type pod struct {
		name string
		spec corev1.PodSpec
	}
	var pods []pod
	for n, d := range r.deployments {
		pods = append(pods, pod{n, d.Spec.Template.Spec})
		f, _ := registry.Lookup(strings.TrimPrefix(n, "maint-"))
		switch {
		case f.Scaled() && d.Spec.Replicas != nil:
			t.Errorf("%s sets replicas: KEDA owns them, an apply would reset them", n)
		case !f.Scaled() && d.Spec.Replicas == nil:
			t.Errorf("%s: no consumer wakes it (no ScaledObject): set its replicas", n)
		}
		c := d.Spec.Template.Spec.Containers[0]
		if len(c.Args) < 2 || c.Args[0] != "function" || c.Args[1] != f.Name {
			t.Errorf("%s runs %q, want maintctl function %s", n, c.Args, f.Name)
		}
		// Graceful termination outlasts the drain (plus the release of keyed partitions).
		grace := d.Spec.Template.Spec.TerminationGracePeriodSeconds
		if grace == nil || time.Duration(*grace)*time.Second <= f.Drain+5*time.Second {
			t.Errorf("%s: terminationGracePeriodSeconds %v, want more than the drain %s plus 5 s", n, grace, f.Drain)
		}
		checkProbes(t, n, c)
	}
	for n, j := range r.jobs {
		pods = append(pods, pod{n, j.Spec.Template.Spec})
	}
	for _, p := range pods {
		checkSecurity(t, p.name, p.spec)
		for _, c := range p.spec.Containers {
			if c.Image != imagebuild.Ref {
				t.Errorf("%s/%s: image %q, want %q (what task image builds)", p.name, c.Name, c.Image, imagebuild.Ref)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s/%s: resources %v: want CPU and memory requests and a memory limit", p.name, c.Name, c.Resources)
			}
			for _, ef := range c.EnvFrom {
				if ef.ConfigMapRef != nil && r.configMaps[ef.ConfigMapRef.Name] == nil {
					t.Errorf("%s/%s: ConfigMap %s does not exist", p.name, c.Name, ef.ConfigMapRef.Name)
				}
			}
			if !hasNATSURL(r, c) {
				t.Errorf("%s/%s: no NATS_URL", p.name, c.Name)
			}
		}
		if p.spec.AutomountServiceAccountToken == nil || *p.spec.AutomountServiceAccountToken {
			t.Errorf("%s: mounts a service account token it never uses", p.name)
		}
	}
}

func hasNATSURL(r *rendered, c corev1.Container) bool {
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef != nil && r.configMaps[ef.ConfigMapRef.Name] != nil && r.configMaps[ef.ConfigMapRef.Name].Data["NATS_URL"] != "" {
			return true
		}
	}
	return false
}

func checkSecurity(t *testing.T, name string, spec corev1.PodSpec) {
	t.Helper()
	ps := spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser != imagebuild.UID {
		t.Errorf("%s: pod security context %+v: want non-root as %d", name, ps, imagebuild.UID)
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("%s/%s: no security context", name, c.Name)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("%s/%s: root file system not read-only", name, c.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("%s/%s: privilege escalation allowed", name, c.Name)
		case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL"):
			t.Errorf("%s/%s: capabilities not dropped", name, c.Name)
		}
	}
}

// checkProbes: liveness on /livez, readiness on /readyz, both on a port the container
// declares, which is the one --admin-listen serves.
func checkProbes(t *testing.T, name string, c corev1.Container) {
	t.Helper()
	listen, ok := argValue(c.Args, "--admin-listen")
	if !ok {
		t.Errorf("%s: no --admin-listen", name)
		return
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		t.Errorf("%s: --admin-listen %q: %v", name, listen, err)
		return
	}
	for _, p := range []struct {
		kind, path string
		probe      *corev1.Probe
	}{{"liveness", "/livez", c.LivenessProbe}, {"readiness", "/readyz", c.ReadinessProbe}, {"startup", "/livez", c.StartupProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s probe", name, p.kind)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s: %s probe on %s, want %s", name, p.kind, p.probe.HTTPGet.Path, p.path)
		}
		var declared *corev1.ContainerPort
		for i, cp := range c.Ports {
			if (p.probe.HTTPGet.Port.StrVal != "" && cp.Name == p.probe.HTTPGet.Port.StrVal) || (p.probe.HTTPGet.Port.StrVal == "" && cp.ContainerPort == p.probe.HTTPGet.Port.IntVal) {
				declared = &c.Ports[i]
			}
		}
		if declared == nil {
			t.Errorf("%s: %s probe on port %s, which the container does not declare", name, p.kind, p.probe.HTTPGet.Port.String())
		} else if strconv.Itoa(int(declared.ContainerPort)) != port {
			t.Errorf("%s: %s probe on port %d, but --admin-listen is %s", name, p.kind, declared.ContainerPort, listen)
		}
	}
}

func checkSelectors(t *testing.T, r *rendered) {
	t.Helper()
	for n, d := range r.deployments {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("%s: selector %v does not match its pod labels %v", n, d.Spec.Selector, d.Spec.Template.Labels)
		}
	}
	covered := map[string]bool{}
	for _, pdb := range r.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		matched := 0
		for n, d := range r.deployments {
			if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				matched++
				covered[n] = true
			}
		}
		if matched != 1 {
			t.Errorf("PodDisruptionBudget %s matches %d deployments, want 1", pdb.Name, matched)
		}
		// A budget of minAvailable would block node drains at one replica or at zero.
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MinAvailable != nil {
			t.Errorf("PodDisruptionBudget %s: want maxUnavailable, not minAvailable", pdb.Name)
		}
	}
	for n := range r.deployments {
		if !covered[n] {
			t.Errorf("%s has no PodDisruptionBudget", n)
		}
	}
	checkServices(t, r)
	if len(r.namespaces) != 1 {
		t.Errorf("%d namespaces, want 1", len(r.namespaces))
	}
}

func checkScaling(t *testing.T, r *rendered, pc provision.Config, values chartValues) {
	t.Helper()
	provisioned := consumersOf(t, pc)
	scaledBy := map[string][]*ScaledObject{}
	for _, so := range r.scaledObjects {
		target := so.Spec.ScaleTargetRef.Name
		scaledBy[target] = append(scaledBy[target], so)
		if r.deployments[target] == nil {
			t.Errorf("ScaledObject %s scales %q, which is not a Deployment here", so.Name, target)
		}
	}
	for _, f := range registry.Functions() {
		sos := scaledBy[deploymentOf(f)]
		switch {
		case !f.Scaled() && len(sos) > 0:
			t.Errorf("ScaledObject %s scales function %s, which serves no consumer", sos[0].Name, f.Name)
		case f.Scaled() && len(sos) != 1:
			t.Errorf("%s is scaled by %d ScaledObjects, want 1 (KEDA refuses a second; see Adding a function in infra/docs/contributing.md)", deploymentOf(f), len(sos))
		case f.Scaled():
			checkScaledObject(t, f, sos[0], provisioned[f.Name], values)
		}
	}
}

// checkScaledObject checks the ScaledObject of function f: its replica bounds, and one
// nats-jetstream trigger on each consumer provisioning makes for it, and on no consumer it
// does not serve.
func checkScaledObject(t *testing.T, f registry.Function, so *ScaledObject, provisioned []registry.Consumer, values chartValues) {
	t.Helper()
	min, max := so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount
	if min == nil || max == nil || *max < *min || *max < 1 {
		t.Errorf("ScaledObject %s: replicas %v..%v", so.Name, min, max)
		return
	}
	pinned := !slices.ContainsFunc(f.Serves, func(s registry.Serve) bool { return !s.Pinned })
	switch {
	case f.Tick && *min < 1:
		t.Errorf("%s: minReplicaCount %d, want at least 1 (every tick must be served)", f.Name, *min)
	case f.CreatesConsumers() && *min < 1:
		// Its triggers cannot name every consumer it makes: it must not wait for one to wake it.
		t.Errorf("%s: minReplicaCount %d, want at least 1", f.Name, *min)
	case !f.Tick && !f.CreatesConsumers() && *min != 0:
		t.Errorf("%s: minReplicaCount %d, want 0 (it scales to zero when no work waits)", f.Name, *min)
	}
	// A pinned consumer is served by one replica at a time: more replicas than consumers
	// would only be standbys.
	if pinned && !f.CreatesConsumers() && int(*max) > len(provisioned) {
		t.Errorf("%s: replicas %d..%d, want at most %d (its consumers)", f.Name, *min, *max, len(provisioned))
	}
	if so.Spec.Fallback == nil || so.Spec.Fallback.Replicas < 1 {
		t.Errorf("ScaledObject %s: no fallback (a missing consumer or an unreachable NATS would leave it at zero)", so.Name)
	}
	triggered := map[string]bool{}
	for _, tr := range so.Spec.Triggers {
		stream, consumer := tr.Metadata["stream"], tr.Metadata["consumer"]
		checkTrigger(t, so, tr, values)
		if owner, ok := registry.Of(stream, consumer); !ok || owner.Name != f.Name {
			t.Errorf("ScaledObject %s: trigger on %s/%s, which function %s does not serve", so.Name, stream, consumer, f.Name)
		}
		isProvisioned := slices.ContainsFunc(provisioned, func(c registry.Consumer) bool { return c.Stream == stream && c.Durable == consumer })
		if !isProvisioned && !slices.ContainsFunc(f.Serves, func(s registry.Serve) bool { return s.Creates && s.Matches(stream, consumer) }) {
			t.Errorf("ScaledObject %s: trigger on %s/%s, which provisioning does not create", so.Name, stream, consumer)
		}
		if triggered[stream+"/"+consumer] {
			t.Errorf("two triggers on %s/%s", stream, consumer)
		}
		triggered[stream+"/"+consumer] = true
	}
	for _, c := range provisioned {
		if !triggered[c.Stream+"/"+c.Durable] {
			t.Errorf("no trigger on %s/%s: work waiting there would not wake a replica of %s", c.Stream, c.Durable, f.Name)
		}
	}
}

// checkTrigger checks one trigger's settings against KEDA's nats-jetstream scaler and the chart.
func checkTrigger(t *testing.T, so *ScaledObject, tr Trigger, values chartValues) {
	t.Helper()
	if tr.Type != "nats-jetstream" {
		t.Errorf("ScaledObject %s: trigger type %s", so.Name, tr.Type)
		return
	}
	for k := range tr.Metadata {
		if !slices.Contains(natsTriggerKeys, k) {
			t.Errorf("ScaledObject %s trigger %s: metadata %q is not a nats-jetstream setting", so.Name, tr.Name, k)
		}
	}
	if tr.Metadata["account"] != "$G" {
		t.Errorf("trigger %s: account %q, want $G (the server has no accounts)", tr.Name, tr.Metadata["account"])
	}
	host, port, err := net.SplitHostPort(tr.Metadata["natsServerMonitoringEndpoint"])
	if err != nil || port != strconv.Itoa(values.Config.Monitor.Port) || !strings.HasPrefix(host, "nats-headless.") {
		t.Errorf("trigger %s: endpoint %q, want the chart's headless service on the monitoring port %d", tr.Name, tr.Metadata["natsServerMonitoringEndpoint"], values.Config.Monitor.Port)
	}
	for _, k := range []string{"lagThreshold", "activationLagThreshold"} {
		if n, err := strconv.Atoi(tr.Metadata[k]); err != nil || n < 0 {
			t.Errorf("trigger %s: %s %q", tr.Name, k, tr.Metadata[k])
		}
	}
}

// checkServices: a Service (the web view's) selects the pods of exactly one Deployment and
// sends each of its ports to a port that Deployment's container declares.
func checkServices(t *testing.T, r *rendered) {
	t.Helper()
	for _, svc := range r.services {
		var target *appsv1.Deployment
		for _, d := range r.deployments {
			if len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
				if target != nil {
					t.Errorf("Service %s selects the pods of %s and %s", svc.Name, target.Name, d.Name)
				}
				target = d
			}
		}
		if target == nil {
			t.Errorf("Service %s selects no Deployment's pods", svc.Name)
			continue
		}
		for _, p := range svc.Spec.Ports {
			found := false
			for _, cp := range target.Spec.Template.Spec.Containers[0].Ports {
				found = found || cp.Name == p.TargetPort.StrVal || (p.TargetPort.StrVal == "" && cp.ContainerPort == p.TargetPort.IntVal)
			}
			if !found {
				t.Errorf("Service %s: port %s goes to %s, which %s does not declare", svc.Name, p.Name, p.TargetPort.String(), target.Name)
			}
		}
	}
}
