package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"maintsignals/infra/registry"
	"maintsignals/shared/telemetry"
	"maintsignals/test/testenv"
)

// TestFunctions_StoppedWhileStartingStopCleanly runs each function on its own, as `maintctl
// function NAME` or a test does, with a context that has already ended: asked to stop before
// it served anything, every one returns nil rather than the error of its first NATS call.
func TestFunctions_StoppedWhileStartingStopCleanly(t *testing.T) {
	env := testenv.Start(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	subs := filepath.Join(t.TempDir(), "subs.json")
	if err := os.WriteFile(subs, []byte(`[{"name": "crm", "url": "http://127.0.0.1:9/hook", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	// What a function alone needs on its command line.
	args := map[string][]string{"webhook": {"--subscriptions", subs}, "web": {"--web-listen", "127.0.0.1:0"}}
	for _, fn := range registry.Functions() {
		t.Run(fn.Name, func(t *testing.T) {
			fs := pflag.NewFlagSet(fn.Name, pflag.ContinueOnError)
			b := registry.Bind(fs, []registry.Function{fn})
			if err := fs.Parse(args[fn.Name]); err != nil {
				t.Fatal(err)
			}
			in := b.Instances[0]
			if in.Check != nil {
				if err := in.Check(context.Background(), testenv.Quiet()); err != nil {
					t.Fatalf("check: %v", err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			done := make(chan error, 1)
			go func() {
				done <- in.Run(ctx, registry.Env{JS: env.JS, Tel: tel, Log: testenv.Quiet(), Tick: time.Minute})
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run = %v, want nil", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not return within 30 s of a context that had ended")
			}
		})
	}
}
