package testenv

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/campaign"
	core "maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/campaignstore"
	"maintsignals/shared/function"
)

// UploadList stores ids as a campaign list file (one per line) in the campaign-lists bucket,
// as `maintctl campaign create --list` does, and returns its reference.
func UploadList(t testing.TB, ctx context.Context, js jetstream.JetStream, ids []string) campaignspec.ListRef {
	t.Helper()
	data := []byte(strings.Join(ids, "\n") + "\n")
	l, err := core.ParseList(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := campaignstore.PutList(ctx, js, l, data); err != nil {
		t.Fatalf("store the list: %v", err)
	}
	return l.Ref(l.SHA256)
}

// RunCampaigns runs the campaign function in the test process until the test ends: its
// commands' consumer, the passes after them, and a pass every `every` of its own (a stack's
// tick is often a minute), with cfg (its logger quiet unless set).
func RunCampaigns(t testing.TB, js jetstream.JetStream, cfg campaign.Config, every time.Duration) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = Quiet()
	}
	ctx, cancel := context.WithCancel(context.Background())
	f, err := campaign.New(ctx, js, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(3)
	go func() {
		defer wg.Done()
		if err := function.Run(ctx, js, f.RuntimeConfigs()[0]); err != nil {
			t.Errorf("campaign commands: %v", err)
		}
	}()
	go func() { defer wg.Done(); f.ServeKicks(ctx) }()
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			_ = f.HandleTick(ctx, function.Message{})
			select {
			case <-ctx.Done():
			case <-time.After(every):
			}
		}
	}()
}
