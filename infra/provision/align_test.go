package provision_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/infra/provision"
	"maintsignals/shared/embedded"
)

// On a replicated topology every consumer provisioning creates is led by the node that leads
// its stream (a consumer on a follower hands messages over late), and provisioning again puts
// back a leader that moved away.
func TestRun_ConsumerLeadersJoinTheirStreamsLeaders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := embedded.StartCluster(ctx, embedded.ClusterConfig{Nodes: 3, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	cfg := provision.Config{Replicas: 3, Partitions: 4}
	rep, err := provision.Run(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	apart := func() []string {
		var out []string
		for _, sc := range provision.Consumers(mustDefaults(t, cfg)) {
			s, err := js.Stream(ctx, sc.Stream)
			if err != nil {
				t.Fatal(err)
			}
			cons, err := s.Consumer(ctx, sc.Durable)
			if err != nil {
				t.Fatal(err)
			}
			if sl, cl := s.CachedInfo().Cluster.Leader, cons.CachedInfo().Cluster.Leader; sl != cl {
				out = append(out, fmt.Sprintf("%s/%s led by %s, its stream by %s", sc.Stream, sc.Durable, cl, sl))
			}
		}
		return out
	}
	if a := apart(); len(a) > 0 {
		t.Fatalf("after provisioning: %v\nreport:\n%v", a, rep)
	}

	// A node restart moves leaders; here one consumer's leader is moved away on purpose.
	sc := provision.Consumers(mustDefaults(t, cfg))[0]
	s, _ := js.Stream(ctx, sc.Stream)
	leader := s.CachedInfo().Cluster.Leader
	for try := 0; ; try++ {
		cons, err := s.Consumer(ctx, sc.Durable)
		if err != nil {
			t.Fatal(err)
		}
		if cons.CachedInfo().Cluster.Leader != leader {
			break
		}
		if try == 20 {
			t.Fatal("could not move the consumer's leader away")
		}
		if _, err := nc.RequestWithContext(ctx, "$JS.API.CONSUMER.LEADER.STEPDOWN."+sc.Stream+"."+sc.Durable, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	rep, err = provision.Run(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, ch := range rep {
		if ch.Action == provision.Moved {
			moved++
		}
	}
	if a := apart(); len(a) > 0 || moved != 1 {
		t.Fatalf("provisioning again moved %d leaders (want 1); apart: %v\nreport:\n%v", moved, a, rep)
	}
}

func mustDefaults(t *testing.T, c provision.Config) provision.Config {
	t.Helper()
	c, err := c.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return c
}
