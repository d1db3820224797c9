package command

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"maintsignals/shared/domain"
)

// Limiter admits commands per entity: a flood of commands for one entity is refused cheaply
// (one read for the state the refusal reports, no write) so that it cannot hold up the other
// entities of its partition for long.
// Each replica keeps its own buckets, so the fleet-wide limit is the per-replica one times the
// number of replicas.
type Limiter struct {
	rate  rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

// NewLimiter admits perSecond commands per entity with bursts of burst; perSecond <= 0 admits
// everything (nil limiter).
func NewLimiter(perSecond float64, burst int) *Limiter {
	if perSecond <= 0 {
		return nil
	}
	return &Limiter{rate: rate.Limit(perSecond), burst: max(burst, 1), buckets: map[string]*bucket{}}
}

// Admit takes a token for key, or returns the rejection of a command over the limit.
func (l *Limiter) Admit(key string, now time.Time) *domain.Rejection {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// Forget idle entities now and then, so memory follows the active set, not the fleet.
	if now.Sub(l.swept) > time.Minute {
		for k, b := range l.buckets {
			if now.Sub(b.used) > time.Minute {
				delete(l.buckets, k)
			}
		}
		l.swept = now
	}
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(l.rate, l.burst)}
		l.buckets[key] = b
	}
	b.used = now
	if b.lim.AllowN(now, 1) {
		return nil
	}
	return &domain.Rejection{Code: domain.CodeRequestNotAllowed, Message: "too many commands for this entity; slow down and send it again"}
}
