package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/embedded"
)

func TestStart_RestartOnTheSameStoreKeepsData(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for round := 0; round < 2; round++ {
		s, err := embedded.Start(embedded.Config{StoreDir: dir, Listen: "127.0.0.1:0", SyncAlways: true})
		if err != nil {
			t.Fatal(err)
		}
		if s.URL() == "" {
			t.Fatal("listening server has no URL")
		}
		nc, err := nats.Connect(s.URL())
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		if round == 0 {
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := js.Publish(ctx, "s", []byte("kept")); err != nil {
				t.Fatal(err)
			}
		} else {
			st, err := js.Stream(ctx, "S")
			if err != nil {
				t.Fatalf("stream lost across restart: %v", err)
			}
			m, err := st.GetMsg(ctx, 1)
			if err != nil || string(m.Data) != "kept" {
				t.Fatalf("message lost across restart: %v", err)
			}
		}
		nc.Close()
		s.Stop()
	}
}

func TestStart_RejectsBadListenAddress(t *testing.T) {
	if _, err := embedded.Start(embedded.Config{StoreDir: t.TempDir(), Listen: "nohost"}); err == nil {
		t.Fatal("accepted a listen address without a port")
	}
	if _, err := embedded.Start(embedded.Config{}); err == nil {
		t.Fatal("accepted an empty store dir")
	}
}

func TestStartCluster_SurvivesTheLossOfTheStreamLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster election takes seconds")
	}
	ctx := context.Background()
	c, err := embedded.StartCluster(ctx, embedded.ClusterConfig{Nodes: 3, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "r3", []byte("1")); err != nil {
		t.Fatal(err)
	}
	leader := c.Leader("R3")
	if leader < 0 {
		t.Fatal("no stream leader")
	}
	c.Kill(leader)
	deadline := time.Now().Add(20 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := js.Publish(pctx, "r3", []byte("2"))
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no publish after leader loss: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
}
