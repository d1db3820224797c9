// Package imagebuild builds the OCI image of maintctl without a container daemon, a registry
// or a base image: a static binary in one layer on scratch, run as a non-root user. The same
// source gives the same image digest, so a digest names a build.
package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image as the Kubernetes manifests of infra/k8s name it.
const (
	Repository = "maintsignals/maintctl"
	Tag        = "dev"
	Ref        = Repository + ":" + Tag

	// BinaryPath is where the binary lives in the image; the entrypoint runs it.
	BinaryPath = "/usr/local/bin/maintctl"
	// UID and GID of the user the container runs as (the "nonroot" of distroless images).
	UID = 65532
	GID = 65532

	// LayoutDir and TarballFile are the names Build writes under its output directory.
	LayoutDir   = "oci"
	TarballFile = "maintctl.tar"
)

// Options configure a build.
type Options struct {
	// ModuleDir is the root of the Go module (the directory of go.mod).
	ModuleDir string
	// Out is the output directory: Out/oci (an OCI image layout) and Out/maintctl.tar (for
	// `docker load`). Both are replaced.
	Out string
	// Arch is the target architecture (GOARCH); the OS is always linux.
	Arch string
	// Ref names the image in the layout's index and the tarball (default Ref).
	Ref string
	// Epoch is the time of every file and of the image's creation, for reproducible builds
	// (default: the Unix epoch; SOURCE_DATE_EPOCH is the usual source).
	Epoch time.Time
	// Binary, when set, is a maintctl already built for linux/Arch; otherwise Build compiles it.
	Binary string
}

// Result describes a built image.
type Result struct {
	Digest       v1.Hash // of the image manifest
	Ref          string
	Layout       string // path of the OCI layout
	Tarball      string // path of the docker-loadable tarball
	BinarySHA256 string // of the binary in the layer
	Size         int64  // of the compressed layer
}

// Build compiles maintctl reproducibly and writes the image.
func Build(ctx context.Context, o Options) (*Result, error) {
	if o.Out == "" {
		return nil, errors.New("no output directory")
	}
	if o.Arch == "" {
		o.Arch = "amd64"
	}
	if o.Ref == "" {
		o.Ref = Ref
	}
	if o.Epoch.IsZero() {
		o.Epoch = time.Unix(0, 0)
	}
	tag, err := name.NewTag(o.Ref)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", o.Ref, err)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	bin := o.Binary
	if bin == "" {
		bin = filepath.Join(o.Out, "maintctl-linux-"+o.Arch)
		if err := CompileMaintctl(ctx, o.ModuleDir, "linux", o.Arch, bin); err != nil {
			return nil, err
		}
	}
	binData, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	layerTar, err := rootfs(binData, o.Epoch)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: o.Epoch.UTC()},
			CreatedBy: "infra/image: maintctl (go build -trimpath, CGO_ENABLED=0)",
		},
		MediaType: types.OCILayer,
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = o.Arch, "linux"
	cf.Created = v1.Time{Time: o.Epoch.UTC()}
	cf.Config = v1.Config{
		Entrypoint: []string{BinaryPath},
		User:       fmt.Sprintf("%d:%d", UID, GID),
		Env:        []string{"PATH=/usr/local/bin"},
		WorkingDir: "/",
		Labels: map[string]string{
			"org.opencontainers.image.title":       "maintctl",
			"org.opencontainers.image.description": "Maintenance Signals: functions, provisioning and admin verbs on NATS JetStream",
		},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}

	lp := filepath.Join(o.Out, LayoutDir)
	if err := os.RemoveAll(lp); err != nil {
		return nil, err
	}
	p, err := layout.Write(lp, empty.Index)
	if err != nil {
		return nil, err
	}
	if err := p.AppendImage(img,
		layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": tag.TagStr(),
			"io.containerd.image.name":          tag.Name(),
		}),
		layout.WithPlatform(v1.Platform{OS: "linux", Architecture: o.Arch})); err != nil {
		return nil, fmt.Errorf("write OCI layout: %w", err)
	}
	tb := filepath.Join(o.Out, TarballFile)
	if err := tarball.WriteToFile(tb, tag, img); err != nil {
		return nil, fmt.Errorf("write tarball: %w", err)
	}
	size, err := layer.Size()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(binData)
	return &Result{Digest: digest, Ref: tag.Name(), Layout: lp, Tarball: tb, BinarySHA256: hex.EncodeToString(sum[:]), Size: size}, nil
}

// CompileMaintctl builds a static maintctl for goos/arch at out, with nothing in it that
// depends on the machine or the moment (paths, build id): the image and the release binaries
// (infra/dist) are built by it.
func CompileMaintctl(ctx context.Context, moduleDir, goos, arch, out string) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", abs, "./infra/maintctl")
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+arch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build maintctl: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// rootfs is the one layer: the binary (owned by root, not writable by the user), a writable
// /tmp, and passwd/group entries so that tools name the user.
func rootfs(bin []byte, epoch time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: epoch, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, GID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", GID)
	steps := []error{
		dir("etc/", 0o755),
		file("etc/group", 0o644, []byte(group)),
		file("etc/passwd", 0o644, []byte(passwd)),
		dir("tmp/", 0o1777),
		dir("usr/", 0o755),
		dir("usr/local/", 0o755),
		dir("usr/local/bin/", 0o755),
		file(strings.TrimPrefix(BinaryPath, "/"), 0o755, bin),
		tw.Close(),
	}
	if err := errors.Join(steps...); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
