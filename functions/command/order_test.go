package command_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"maintsignals/functions/command"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// TestHandle_FourReplicasKeepPerEntityOrder publishes 2,000 random commands over 20 entities as
// fast as it can, with four replicas consuming, and checks every entity's final record and
// outcomes against a sequential application through the pure state machine, in the order the
// stream stored the commands; and that each entity's events come in that same order.
func TestHandle_FourReplicasKeepPerEntityOrder(t *testing.T) {
	const n, entities = 2000, 20
	env := testenv.Start(t)
	startReplicas(t, env, 4, command.Config{})
	ids := testenv.ResourceIDs("order", entities)
	cmds := testenv.RandomCommands(rand.New(rand.NewPCG(7, 11)), n, ids)
	pjs := testenv.JetStream(t, testenv.Connect(t, env.Server))
	testenv.PublishAll(t, pjs, cmds, nil)

	counts := testenv.Verify(t, env.JS, cmds, 60*time.Second)
	t.Log(counts)
	if counts.Applied == 0 || counts.Rejected == 0 {
		t.Fatalf("the random mix must exercise both paths: %v", counts)
	}
	// Events of one entity are published in the order its commands were stored.
	for _, id := range ids {
		last := uint64(0)
		for _, ev := range readEvents(t, env.JS, domain.EventSubject(domain.MustKey(id))) {
			if ev.CommandSeq <= last {
				t.Fatalf("%s: event for command seq %d after seq %d", id, ev.CommandSeq, last)
			}
			last = ev.CommandSeq
		}
	}
}
