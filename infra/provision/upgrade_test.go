package provision_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// A deployment provisioned before the partitions were pinned (one command in flight, any
// replica) is moved over in place: the durable consumers keep their position.
func TestRun_UnpinnedPartitionConsumerIsMovedToPinnedInPlace(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	c, _ := env.JS.Consumer(ctx, domain.CommandsStream, domain.CommandConsumer(0))
	cfg := c.CachedInfo().Config
	cfg.PriorityPolicy = jetstream.PriorityPolicyNone
	cfg.PriorityGroups = nil
	cfg.PinnedTTL = 0
	cfg.MaxAckPending = 1
	if err := env.JS.DeleteConsumer(ctx, domain.CommandsStream, cfg.Durable); err != nil {
		t.Fatal(err)
	}
	if _, err := env.JS.CreateConsumer(ctx, domain.CommandsStream, cfg); err != nil {
		t.Fatal(err)
	}
	rep, err := provision.Run(ctx, env.JS, provision.Config{})
	if err != nil {
		t.Fatalf("provision: %v\n%v", err, rep)
	}
	c, err = env.JS.Consumer(ctx, domain.CommandsStream, cfg.Durable)
	if err != nil {
		t.Fatal(err)
	}
	got := c.CachedInfo().Config
	want := provision.DefaultConfig()
	if got.PriorityPolicy != jetstream.PriorityPolicyPinned || got.MaxAckPending != want.InFlight || got.PinnedTTL != domain.PinnedTTL(want.AckWait) {
		t.Errorf("after provisioning: policy %v, max ack pending %d, pinned TTL %s; want pinned, %d, %s",
			got.PriorityPolicy, got.MaxAckPending, got.PinnedTTL, want.InFlight, domain.PinnedTTL(want.AckWait))
	}
}
