// Command image builds the OCI image of maintctl (task image): an OCI image layout and a
// tarball for `docker load`, with no daemon, no registry and no base image.
//
//	go run ./infra/image -out bin/image
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"time"

	"maintsignals/infra/image/imagebuild"
)

func main() {
	out := flag.String("out", "bin/image", "output directory: OUT/oci (OCI layout) and OUT/maintctl.tar (docker load)")
	arch := flag.String("arch", runtime.GOARCH, "target architecture (GOARCH); the OS is linux")
	ref := flag.String("ref", imagebuild.Ref, "image name and tag, as the Kubernetes manifests use it")
	module := flag.String("module", ".", "root of the Go module (where go.mod is)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	epoch := time.Unix(0, 0)
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			log.Error("SOURCE_DATE_EPOCH is not a number of seconds", "value", s)
			os.Exit(1)
		}
		epoch = time.Unix(sec, 0)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	res, err := imagebuild.Build(ctx, imagebuild.Options{ModuleDir: *module, Out: *out, Arch: *arch, Ref: *ref, Epoch: epoch})
	if err != nil {
		log.Error("image build failed", "error", err)
		os.Exit(1)
	}
	fmt.Printf("image %s\ndigest %s\nlayer %d bytes (compressed)\nlayout %s\ntarball %s (docker load -i %s)\nbuilt in %s\n",
		res.Ref, res.Digest, res.Size, res.Layout, res.Tarball, res.Tarball, time.Since(start).Round(time.Millisecond))
}
