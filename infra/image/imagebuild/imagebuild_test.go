package imagebuild_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"maintsignals/infra/image/imagebuild"
	"maintsignals/infra/provision"
	"maintsignals/shared/embedded"
	"maintsignals/test/testenv"
)

// moduleRoot is the directory of go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}

// built is one image, built once for the whole package: compiling maintctl is the slow part.
type built struct {
	res    *imagebuild.Result
	binary []byte // what go build wrote
	out    string
}

var first, second *built

func build(t *testing.T, which **built) *built {
	t.Helper()
	if *which != nil {
		return *which
	}
	out, err := os.MkdirTemp("", "maint-image-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := imagebuild.Build(ctx, imagebuild.Options{ModuleDir: moduleRoot(t), Out: out, Arch: goruntime.GOARCH})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	t.Logf("image %s built in %s: layer %d bytes", res.Digest, time.Since(start).Round(time.Millisecond), res.Size)
	bin, err := os.ReadFile(filepath.Join(out, "maintctl-linux-"+goruntime.GOARCH))
	if err != nil {
		t.Fatal(err)
	}
	*which = &built{res: res, binary: bin, out: out}
	return *which
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, b := range []*built{first, second} {
		if b != nil {
			os.RemoveAll(b.out)
		}
	}
	os.Exit(code)
}

// layerFiles reads the layer's tar: every header, and the content of regular files.
func layerFiles(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1 (scratch plus the binary)", len(layers))
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	headers, data := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		headers[h.Name] = h
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			data[h.Name] = b
		}
	}
	return headers, data
}

func TestImageLayoutIsAScratchNonRootMaintctl(t *testing.T) {
	b := build(t, &first)
	idx, err := layout.ImageIndexFromPath(b.res.Layout)
	if err != nil {
		t.Fatalf("read the OCI layout back: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index has %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if desc.MediaType != types.OCIManifestSchema1 || desc.Digest != b.res.Digest {
		t.Fatalf("index entry %s %s, want %s %s", desc.MediaType, desc.Digest, types.OCIManifestSchema1, b.res.Digest)
	}
	if got := desc.Annotations["org.opencontainers.image.ref.name"]; got != imagebuild.Tag {
		t.Errorf("ref.name annotation %q, want %q", got, imagebuild.Tag)
	}
	if desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != goruntime.GOARCH {
		t.Errorf("platform %+v, want linux/%s", desc.Platform, goruntime.GOARCH)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("manifest %s, config %s: want OCI media types", m.MediaType, m.Config.MediaType)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Entrypoint; len(got) != 1 || got[0] != imagebuild.BinaryPath || filepath.Base(got[0]) != "maintctl" {
		t.Errorf("entrypoint %q, want [%s]", got, imagebuild.BinaryPath)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (non-root)", cf.Config.User)
	}
	if cf.OS != "linux" || cf.Architecture != goruntime.GOARCH || !cf.Created.Time.Equal(time.Unix(0, 0)) {
		t.Errorf("config os %s arch %s created %s", cf.OS, cf.Architecture, cf.Created.Time)
	}

	headers, data := layerFiles(t, img)
	bin := strings.TrimPrefix(imagebuild.BinaryPath, "/")
	if !bytes.Equal(data[bin], b.binary) {
		t.Fatalf("the binary in the layer (%d bytes) is not the one built (%d bytes)", len(data[bin]), len(b.binary))
	}
	sum := sha256.Sum256(data[bin])
	if hex.EncodeToString(sum[:]) != b.res.BinarySHA256 {
		t.Errorf("binary digest differs from the build's report")
	}
	for n, h := range headers {
		if h.Mode&(04000|02000) != 0 {
			t.Errorf("%s has a setuid or setgid bit (mode %o)", n, h.Mode)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s is owned by %d:%d; files belong to root, so the user cannot change them", n, h.Uid, h.Gid)
		}
		if !h.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s has time %s, want the fixed epoch", n, h.ModTime)
		}
	}
	if h := headers[bin]; h == nil || h.Mode&0o111 == 0 || h.Mode&0o022 != 0 {
		t.Errorf("binary header %+v: want executable, not group- or world-writable", h)
	}

	// The tarball for `docker load` holds the same image under the manifests' name.
	tag, err := name.NewTag(imagebuild.Ref)
	if err != nil {
		t.Fatal(err)
	}
	timg, err := tarball.ImageFromPath(b.res.Tarball, &tag)
	if err != nil {
		t.Fatalf("read the docker tarball back: %v", err)
	}
	// docker load rebuilds the manifest; what it runs is the config and the layer.
	want, _ := img.ConfigName()
	if got, err := timg.ConfigName(); err != nil || got != want {
		t.Errorf("tarball image config %s (%v), want %s", got, err, want)
	}
	wl, _ := img.Layers()
	tl, err := timg.Layers()
	if err != nil || len(tl) != 1 {
		t.Fatalf("tarball layers %d (%v), want 1", len(tl), err)
	}
	if gd, _ := tl[0].DiffID(); func() bool { wd, _ := wl[0].DiffID(); return gd != wd }() {
		t.Errorf("tarball layer %s differs from the layout's", gd)
	}

	// The binary is maintctl: run it (the host is linux/GOARCH too).
	if goruntime.GOOS == "linux" {
		exe := filepath.Join(t.TempDir(), "maintctl")
		if err := os.WriteFile(exe, data[bin], 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(exe, "version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "maintctl ") {
			t.Fatalf("maintctl version from the layer: %v: %s", err, out)
		}
	}
}

func TestTwoBuildsGiveOneDigest(t *testing.T) {
	a := build(t, &first)
	b := build(t, &second)
	if a.res.Digest != b.res.Digest {
		t.Fatalf("two builds of one tree: %s and %s", a.res.Digest, b.res.Digest)
	}
	ta, err := os.ReadFile(a.res.Tarball)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := os.ReadFile(b.res.Tarball)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ta, tb) {
		t.Fatal("the two docker tarballs differ")
	}
}

func TestBuildRefusesABadReference(t *testing.T) {
	_, err := imagebuild.Build(context.Background(), imagebuild.Options{ModuleDir: moduleRoot(t), Out: t.TempDir(), Ref: "Not A Ref"})
	if err == nil || !strings.Contains(err.Error(), "image reference") {
		t.Fatalf("err = %v, want a reference error", err)
	}
	if _, err := imagebuild.Build(context.Background(), imagebuild.Options{ModuleDir: moduleRoot(t)}); err == nil {
		t.Fatal("a build without an output directory succeeded")
	}
}

func TestCompileFailureIsReported(t *testing.T) {
	err := imagebuild.CompileMaintctl(context.Background(), t.TempDir(), "linux", goruntime.GOARCH, filepath.Join(t.TempDir(), "m"))
	if err == nil || !strings.Contains(err.Error(), "go build maintctl") {
		t.Fatalf("err = %v, want the go build failure", err)
	}
}

// realRunSkip says why the image cannot be run for real here ("" when it can).
func realRunSkip() string {
	if goruntime.GOOS != "linux" || os.Geteuid() != 0 {
		return "running the image needs root on linux (runc); .ci/run runs as root"
	}
	for _, tool := range []string{"runc", "umoci"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " is not installed (apt-get install runc umoci; .ci/run installs them when it can reach Debian's packages)"
		}
	}
	return ""
}

// bundle unpacks the image with umoci and sets the process and the root file system as the
// Kubernetes manifests do (read-only root); the container shares the host's network so that
// it reaches the test's NATS and the test reaches its probes.
func bundle(t *testing.T, b *built, args []string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle")
	if out, err := exec.Command("umoci", "unpack", "--image", b.res.Layout+":"+imagebuild.Tag, dir).CombinedOutput(); err != nil {
		t.Fatalf("umoci unpack: %v: %s", err, out)
	}
	path := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	proc := spec["process"].(map[string]any)
	proc["args"] = args
	proc["terminal"] = false
	user := proc["user"].(map[string]any)
	if uid, _ := user["uid"].(float64); uid != imagebuild.UID {
		t.Fatalf("umoci maps the image's user to uid %v, want %d", user["uid"], imagebuild.UID)
	}
	spec["root"].(map[string]any)["readonly"] = true
	linux := spec["linux"].(map[string]any)
	var ns []any
	for _, n := range linux["namespaces"].([]any) {
		if n.(map[string]any)["type"] != "network" {
			ns = append(ns, n)
		}
	}
	linux["namespaces"] = ns
	raw, err = json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runcCmd(state string, args ...string) *exec.Cmd {
	return exec.Command("runc", append([]string{"--root", state}, args...)...)
}

func TestImageRunsForReal(t *testing.T) {
	if why := realRunSkip(); why != "" {
		t.Skip("not running the image for real: " + why)
	}
	b := build(t, &first)
	state := t.TempDir()
	id := "maint-version-" + strconv.Itoa(os.Getpid())
	out, err := runcCmd(state, "run", "--bundle", bundle(t, b, []string{"maintctl", "version"}), id).CombinedOutput()
	_ = runcCmd(state, "delete", "-f", id).Run()
	if err != nil || !strings.HasPrefix(string(out), "maintctl ") {
		t.Fatalf("runc run maintctl version: %v: %s", err, out)
	}
	t.Logf("in the container: %s", strings.TrimSpace(string(out)))

	// A function in the container, against a provisioned NATS: /readyz answers from inside.
	s, err := embedded.Start(embedded.Config{Name: "image-0", StoreDir: t.TempDir(), Listen: "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	js := testenv.JetStream(t, testenv.Connect(t, s))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := provision.Run(ctx, js, provision.Config{Tick: time.Minute, Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	admin := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	id = "maint-function-" + strconv.Itoa(os.Getpid())
	var logs bytes.Buffer
	run := runcCmd(state, "run", "--bundle", bundle(t, b, []string{"maintctl", "function", "command", "--server", s.URL(), "--admin-listen", admin}), id)
	run.Stdout, run.Stderr = &logs, &logs
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	defer func() { _ = runcCmd(state, "delete", "-f", id).Run() }()
	ready := false
	for !ready {
		select {
		case err := <-exited:
			t.Fatalf("the container exited before it was ready: %v\n%s", err, logs.String())
		case <-ctx.Done():
			t.Fatalf("the container never answered /readyz 200\n%s", logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if resp, err := http.Get("http://" + admin + "/readyz"); err == nil {
			ready = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
	}
	if out, err := runcCmd(state, "kill", id, "TERM").CombinedOutput(); err != nil {
		t.Fatalf("runc kill TERM: %v: %s", err, out)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("after SIGTERM the function exited with %v, want 0\n%s", err, logs.String())
		}
	case <-ctx.Done():
		t.Fatalf("the function did not stop on SIGTERM\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "function stopped") {
		t.Errorf("no clean stop in the container's log:\n%s", logs.String())
	}
}
