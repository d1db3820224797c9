package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// WebhookSettled waits until the webhook feed holds a copy of everything its sources stored
// from where each source starts, and subscription sub has settled every message of it (so
// that what was not delivered by then never will be). The feed must hold no replays.
func WebhookSettled(t testing.TB, js jetstream.JetStream, sub string, within time.Duration) {
	t.Helper()
	ctx := context.Background()
	Eventually(t, within, "the webhook feed copied and subscription "+sub+" settled", func() bool {
		feed, err := js.Stream(ctx, domain.WebhookStream)
		if err != nil {
			return false
		}
		var want uint64
		for _, src := range feed.CachedInfo().Config.Sources {
			s, err := js.Stream(ctx, src.Name)
			if err != nil {
				return false
			}
			want += s.CachedInfo().State.LastSeq + 1 - max(src.OptStartSeq, 1)
		}
		c, err := js.Consumer(ctx, domain.WebhookStream, domain.WebhookConsumer(sub))
		if err != nil {
			return false
		}
		info := c.CachedInfo()
		return feed.CachedInfo().State.Msgs == want && info.NumPending == 0 && info.NumAckPending == 0
	})
}
