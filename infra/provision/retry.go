package provision

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RetryFor is how long RunRetrying runs a failed pass again.
const RetryFor = time.Minute

// RunRetrying is Run across NATS leader elections, as a cluster that has just started (or
// just lost a node) holds them: a request can meet an election and get no answer at all. Each
// request is bounded by the client's default timeout rather than by ctx's deadline (ctx still
// cancels), and a pass that failed that way is run again, a second apart, for up to RetryFor.
// The report merges the passes: what an earlier pass created still shows as created.
func RunRetrying(ctx context.Context, js jetstream.JetStream, c Config, log *slog.Logger) (Report, error) {
	if log == nil {
		log = slog.Default()
	}
	pass, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	deadline := time.Now().Add(RetryFor)
	var rep Report
	for {
		next, err := Run(pass, js, c)
		rep = mergeReports(rep, next)
		if err == nil || !transient(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return rep, err
		}
		log.Warn("provisioning met a NATS leader election; trying again", "error", err)
		select {
		case <-ctx.Done():
			return rep, err
		case <-time.After(time.Second):
		}
	}
}

// transient tells a failure that trying again may cure: no answer in time, or JetStream
// temporarily unavailable (503).
func transient(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		(errors.As(err, &apiErr) && apiErr.Code == 503)
}

// mergeReports returns next, where what was created or updated by the earlier pass prev shows
// as such instead of unchanged, and what it deleted is listed too.
func mergeReports(prev, next Report) Report {
	done := make(map[string]Change, len(prev))
	for _, ch := range prev {
		if ch.Action == Created || ch.Action == Updated {
			done[ch.Kind+" "+ch.Name] = ch
		}
	}
	out := make(Report, len(next))
	seen := make(map[string]bool, len(next))
	for i, ch := range next {
		seen[ch.Kind+" "+ch.Name] = true
		if earlier, ok := done[ch.Kind+" "+ch.Name]; ok && ch.Action == Unchanged {
			ch = earlier
		}
		out[i] = ch
	}
	// What an earlier pass deleted is not in the next one at all.
	for _, ch := range prev {
		if ch.Action == Deleted && !seen[ch.Kind+" "+ch.Name] {
			out = append(out, ch)
		}
	}
	return out
}
