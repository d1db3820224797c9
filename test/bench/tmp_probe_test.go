package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"maintsignals/functions/emitter"
	"maintsignals/shared/telemetry"
	"maintsignals/test/otlpreceiver"
)

func TestProbeEmitter(t *testing.T) {
	if os.Getenv("PROBE") == "" {
		t.Skip()
	}
	ctx := context.Background()
	srv, err := startServer(ctx, topology{replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.stop()
	r, _ := otlpreceiver.New(otlpreceiver.WithoutPayloads())
	defer r.Close()
	tel, _ := telemetry.Setup(ctx, telemetry.Config{Endpoint: r.GRPCEndpoint(), Protocol: "grpc", Interval: time.Hour})
	e, err := emitter.New(ctx, srv.js, tel, emitter.Config{ExportTimeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	filled := 0
	for _, n := range []int{100_000, 200_000} {
		if err := fillBucket(ctx, srv.js, filled, n); err != nil {
			t.Fatal(err)
		}
		filled = n
		for range 2 {
			c, err := measure(func() error { return emitOnce(ctx, e, n) })
			fmt.Println(n, c, err)
		}
	}
}
