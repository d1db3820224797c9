package registry_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"maintsignals/infra/registry"
	"maintsignals/test/testenv"
)

// topologies are provisioning settings the consumers must hold under.
var topologies = []registry.Topology{
	{Replicas: 1, Partitions: 8, InFlight: 64, AckWait: 5 * time.Second, Tick: time.Minute},
	{Replicas: 3, Partitions: 1, InFlight: 1, AckWait: time.Second, Tick: time.Second},
	{Replicas: 5, Partitions: 256, InFlight: 10000, AckWait: time.Minute, Tick: time.Hour},
}

func TestFunctions_EveryEntryIsComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range registry.Functions() {
		switch {
		case f.Name == "" || strings.ContainsAny(f.Name, " ./*>"):
			t.Errorf("%q: a name is one word", f.Name)
		case seen[f.Name]:
			t.Errorf("%s: listed twice", f.Name)
		case f.About == "" || f.Role == "" || f.Drain <= 0 || f.Flags == nil:
			t.Errorf("%s: needs About, Role, Drain and Flags: %+v", f.Name, f)
		}
		seen[f.Name] = true
		if got, ok := registry.Lookup(f.Name); !ok || got.Name != f.Name {
			t.Errorf("Lookup(%q) = %v, %v", f.Name, got.Name, ok)
		}
		in := f.Flags(pflag.NewFlagSet(f.Name, pflag.ContinueOnError))
		if in.Run == nil {
			t.Errorf("%s: its Flags return no Run", f.Name)
		}
	}
	if _, ok := registry.Lookup("bogus"); ok {
		t.Error("Lookup found a function that is not there")
	}
}

// TestFunctions_ConsumersAreProvisionedAndServed: every consumer an entry has provisioned is
// one it serves and no other function does, and everything it serves but does not create is
// provisioned, whatever the partition count.
func TestFunctions_ConsumersAreProvisionedAndServed(t *testing.T) {
	for _, top := range topologies {
		names := map[string]string{}
		for _, f := range registry.Functions() {
			var own []registry.Consumer
			if f.Consumers != nil {
				own = f.Consumers(top)
			}
			for _, c := range own {
				if other, ok := names[c.Stream+"/"+c.Durable]; ok {
					t.Errorf("%s/%s is provisioned for %s and %s", c.Stream, c.Durable, other, f.Name)
				}
				names[c.Stream+"/"+c.Durable] = f.Name
				if owner, ok := registry.Of(c.Stream, c.Durable); !ok || owner.Name != f.Name {
					t.Errorf("%s: consumer %s/%s is served by %q, want %s (its Serves)", f.Name, c.Stream, c.Durable, owner.Name, f.Name)
				}
				if c.Replicas != top.Replicas || c.AckPolicy.String() != "AckExplicit" {
					t.Errorf("%s: consumer %s/%s: replicas %d, ack policy %s", f.Name, c.Stream, c.Durable, c.Replicas, c.AckPolicy)
				}
			}
			for _, sv := range f.Serves {
				n := 0
				for _, c := range own {
					if sv.Matches(c.Stream, c.Durable) {
						n++
					}
				}
				if n == 0 && !sv.Creates {
					t.Errorf("%s serves %s/%s, which nobody provisions (add it to its Consumers)", f.Name, sv.Stream, sv.Consumer)
				}
				if sv.Consumer == "*" && sv.Prefix == "" {
					t.Errorf("%s: a wildcard Serve on %s needs the names' Prefix", f.Name, sv.Stream)
				}
			}
		}
	}
}

// TestFunctions_SharedFlagsAgree: `up` takes the union of the functions' flags, one flag per
// name, so functions that share a name must mean the same type and default by it.
func TestFunctions_SharedFlagsAgree(t *testing.T) {
	first := map[string]*pflag.Flag{}
	owner := map[string]string{}
	for _, f := range registry.Functions() {
		fs := pflag.NewFlagSet(f.Name, pflag.ContinueOnError)
		f.Flags(fs)
		fs.VisitAll(func(fl *pflag.Flag) {
			if prev, ok := first[fl.Name]; ok {
				if prev.Value.Type() != fl.Value.Type() || prev.DefValue != fl.DefValue {
					t.Errorf("--%s: %s has %s default %q, %s has %s default %q", fl.Name, owner[fl.Name], prev.Value.Type(), prev.DefValue, f.Name, fl.Value.Type(), fl.DefValue)
				}
				return
			}
			first[fl.Name], owner[fl.Name] = fl, f.Name
		})
	}
}

// fake is a function with one flag, --x, that records the value it ran with.
func fake(name string, got *sync.Map, run func(context.Context) error) registry.Function {
	return registry.Function{Name: name, About: name, Role: "function", Drain: time.Second, Flags: func(fs *pflag.FlagSet) registry.Instance {
		x := fs.Duration("x", time.Hour, "how long")
		return registry.Instance{Run: func(ctx context.Context, _ registry.Env) error {
			got.Store(name, *x)
			return run(ctx)
		}}
	}}
}

func untilDone(ctx context.Context) error { <-ctx.Done(); return nil }

func TestBind_ASharedFlagReachesEveryFunction(t *testing.T) {
	var got sync.Map
	fs := pflag.NewFlagSet("up", pflag.ContinueOnError)
	b := registry.Bind(fs, []registry.Function{fake("a", &got, untilDone), fake("b", &got, untilDone)})
	if u := fs.Lookup("x").Usage; u != "a, b: how long" {
		t.Errorf("usage %q, want the owners named", u)
	}
	if err := fs.Parse([]string{"--x", "2h"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var started []string
	err := b.Run(ctx, registry.Env{}, func(names []string) {
		started = names
		go func() {
			for _, n := range names {
				for _, ok := got.Load(n); !ok; _, ok = got.Load(n) {
					time.Sleep(time.Millisecond)
				}
			}
			cancel()
		}()
	})
	if err != nil || fmt.Sprint(started) != "[a b]" {
		t.Fatalf("Run = %v, started %v", err, started)
	}
	for _, n := range []string{"a", "b"} {
		if v, _ := got.Load(n); v != 2*time.Hour {
			t.Errorf("%s ran with --x %v, want 2h", n, v)
		}
	}
}

func TestBind_OneFunctionFailingStopsTheOthers(t *testing.T) {
	var got sync.Map
	boom := errors.New("boom")
	b := registry.Bind(pflag.NewFlagSet("up", pflag.ContinueOnError), []registry.Function{
		fake("a", &got, untilDone),
		fake("b", &got, func(context.Context) error { return boom }),
	})
	err := b.Run(context.Background(), registry.Env{}, nil)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "function b") {
		t.Fatalf("Run = %v, want b's error, named", err)
	}
	if _, ok := got.Load("a"); !ok {
		t.Error("a did not run")
	}
}

func TestBind_AFunctionThatReturnsEarlyIsAFailure(t *testing.T) {
	var got sync.Map
	b := registry.Bind(pflag.NewFlagSet("up", pflag.ContinueOnError), []registry.Function{
		fake("a", &got, func(context.Context) error { return nil }),
	})
	if err := b.Run(context.Background(), registry.Env{}, nil); !errors.Is(err, registry.ErrStopped) {
		t.Fatalf("Run = %v, want ErrStopped", err)
	}
}

func TestBind_AFailedCheckRunsNothing(t *testing.T) {
	ran := false
	bad := errors.New("bad flag")
	f := registry.Function{Name: "a", Flags: func(*pflag.FlagSet) registry.Instance {
		return registry.Instance{
			Check: func(context.Context, *slog.Logger) error { return bad },
			Run:   func(context.Context, registry.Env) error { ran = true; return nil },
		}
	}}
	if err := registry.Bind(pflag.NewFlagSet("x", pflag.ContinueOnError), []registry.Function{f}).Run(context.Background(), registry.Env{}, nil); !errors.Is(err, bad) || ran {
		t.Fatalf("Run = %v, ran %v; want the check's error and nothing run", err, ran)
	}
}

func TestBind_AStopWhileStartingIsNoFailure(t *testing.T) {
	var got sync.Map
	b := registry.Bind(pflag.NewFlagSet("up", pflag.ContinueOnError), []registry.Function{
		fake("a", &got, func(ctx context.Context) error { <-ctx.Done(); return fmt.Errorf("open bucket: %w", ctx.Err()) }),
	})
	ctx, cancel := context.WithCancel(context.Background())
	if err := b.Run(ctx, registry.Env{}, func([]string) { cancel() }); err != nil {
		t.Fatalf("Run = %v, want a clean stop", err)
	}
}

func TestBind_AFunctionRunsOnTheConnectionOfItsRole(t *testing.T) {
	env := testenv.Start(t)
	other := testenv.JetStream(t, testenv.Connect(t, env.Server))
	var got sync.Map
	run := func(name, role string) registry.Function {
		return registry.Function{Name: name, Role: role, Flags: func(*pflag.FlagSet) registry.Instance {
			return registry.Instance{Run: func(ctx context.Context, e registry.Env) error {
				got.Store(name, e.JS)
				<-ctx.Done()
				return nil
			}}
		}}
	}
	b := registry.Bind(pflag.NewFlagSet("up", pflag.ContinueOnError), []registry.Function{run("w", "function"), run("r", "reader")})
	ctx, cancel := context.WithCancel(context.Background())
	if err := b.Run(ctx, registry.Env{JS: env.JS, ByRole: map[string]jetstream.JetStream{"reader": other}}, func([]string) {
		testenv.Eventually(t, 5*time.Second, "both running", func() bool {
			_, w := got.Load("w")
			_, r := got.Load("r")
			return w && r
		})
		cancel()
	}); err != nil {
		t.Fatal(err)
	}
	if w, _ := got.Load("w"); w != env.JS {
		t.Error("the function of the function role did not get env.JS")
	}
	if r, _ := got.Load("r"); r != other {
		t.Error("the reader did not get its role's connection")
	}
}
