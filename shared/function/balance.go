package function

import (
	"context"
	"time"
)

// balance spreads the pins over the replicas. A replica that starts first (or reconnects
// first) is pinned to every partition; every period, a replica holding more than its share
// releases one, which goes to a replica waiting for it. The number of replicas is read from the
// pull requests waiting on the consumers: every replica keeps one on each.
func (r *runner) balance(ctx context.Context, ks []*keyed, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		replicas := -1 // the fewest pull requests waiting on any consumer
		var mine []*keyed
		for _, k := range ks {
			info, err := k.cons.Info(ctx)
			if err != nil {
				r.log.Debug("balance: consumer info", "consumer", k.name, "err", err)
				replicas = -1
				break
			}
			if replicas < 0 || info.NumWaiting < replicas {
				replicas = info.NumWaiting
			}
			if k.pinnedHere(info) {
				mine = append(mine, k)
			}
		}
		if replicas < 2 {
			continue
		}
		share := (len(ks) + replicas - 1) / replicas
		if len(mine) <= share {
			continue
		}
		k := mine[len(mine)-1]
		err := r.unpin(ctx, k)
		r.log.Info("balance: releasing a partition to another replica", "consumer", k.name, "pinned_here", len(mine), "replicas", replicas, "err", err)
	}
}
