package campaign

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	"maintsignals/shared/campaignspec"
	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// Defaults of Settings.
const (
	// DefaultMargin: an announcement goes out up to this long before start − announceLead,
	// and one due at once is stored within this long of the plan's time (see Settings).
	DefaultMargin = 2 * time.Minute
	// DefaultRetryAfter: a Pending refused because an update was in progress is sent again
	// this long after the refusal, longer than the commands stream's duplicate window (2 min)
	// so that the stream does not drop it as a copy.
	DefaultRetryAfter = 3 * time.Minute
)

// Settings are the campaign function's settings that the plan and the rules depend on.
type Settings struct {
	// MinNotice is the command function's --min-notice; the notice in force for an entity is
	// the larger of it and its policy's (policy.NoticeInForce).
	MinNotice time.Duration
	// Margin (DefaultMargin when 0) covers the time between deciding and storing an
	// announcement: the function sends an entity's Pending once now ≥ start − announceLead −
	// Margin, so it is stored by start − announceLead even a tick late; and the plan gives
	// one due at once a start at least Margin + the notice after the plan's time. It should
	// exceed the function's tick plus a publish's latency.
	Margin time.Duration
	// RetryAfter is DefaultRetryAfter when 0.
	RetryAfter time.Duration
}

func (s Settings) margin() time.Duration {
	if s.Margin <= 0 {
		return DefaultMargin
	}
	return s.Margin
}

func (s Settings) retryAfter() time.Duration {
	if s.RetryAfter <= 0 {
		return DefaultRetryAfter
	}
	return s.RetryAfter
}

// Notice is the notice in force for an entity that policy p covers (nil: none).
func (s Settings) Notice(p *policy.Policy) time.Duration { return policy.NoticeInForce(p, s.MinNotice) }

// Policies returns the policy in force for the entity of key, nil when none covers it. It
// should return the same *policy.Policy for the entities of one scope: the planner keeps,
// per policy, which slots it allows.
type Policies func(key string) *policy.Policy

// Planner places windows on a campaign's slots one entity at a time, keeping what each slot
// holds. Slot k starts at window.earliest + k·slot; the last slot is the last whose window
// ends by the deadline. A Planner is not safe for concurrent use.
type Planner struct {
	spec      *campaignspec.Spec
	now       time.Time
	margin    time.Duration
	minNotice time.Duration
	n, last   int

	count []int32 // window starts per slot
	next  []int32 // union-find: next[k] leads to the first slot ≥ k with room (last+1: none)

	subCap   int32
	subs     map[string]uint32
	subCount map[uint64]int32 // (subscription, slot) → window starts
	subNext  map[uint64]int32 // (subscription, slot) full → a later slot to look at

	memo     map[*policy.Policy][]int32 // per policy: first allowed slot ≥ k, -1 not known yet
	memoLeft int

	buf []byte // seed + "/" + key, hashed
}

// memoBudget bounds the slots the planner remembers for all policies together (4 bytes each).
const memoBudget = 1 << 24

// NewPlanner is a planner with every slot empty, planning at now with the settings.
func NewPlanner(s *campaignspec.Spec, set Settings, now time.Time) *Planner {
	last := int(s.Deadline.Sub(s.Earliest)-s.Length) / int(s.Slot)
	p := &Planner{
		spec: s, now: now, margin: set.margin(), minNotice: set.MinNotice,
		n: s.PreferredSlots(), last: last,
		count: make([]int32, last+1), next: make([]int32, last+2),
		memo: map[*policy.Policy][]int32{}, memoLeft: memoBudget,
	}
	for k := range p.next {
		p.next[k] = int32(k)
	}
	if s.MaxPerSubscription > 0 && s.MaxPerSubscription < s.MaxPerSlot {
		p.subCap = int32(s.MaxPerSubscription)
		p.subs, p.subCount, p.subNext = map[string]uint32{}, map[uint64]int32{}, map[uint64]int32{}
	}
	return p
}

// Slots is the number of slots.
func (p *Planner) Slots() int { return p.last + 1 }

// SlotStart is when slot k starts.
func (p *Planner) SlotStart(k int) time.Time {
	return p.spec.Earliest.Add(time.Duration(k) * p.spec.Slot)
}

// Count is how many windows start in slot k.
func (p *Planner) Count(k int) int { return int(p.count[k]) }

// Preferred is the preferred slot of the entity of key: the first 8 bytes of
// SHA-256(seed + "/" + key), big-endian, modulo across / slot.
func (p *Planner) Preferred(key string) int {
	p.buf = append(append(append(p.buf[:0], p.spec.Seed...), '/'), key...)
	sum := sha256.Sum256(p.buf)
	return int(binary.BigEndian.Uint64(sum[:8]) % uint64(p.n))
}

// Reserve counts a window of the entity of key that already starts at start (one placed
// before, kept by a re-plan) in its slot, so that the caps count it.
func (p *Planner) Reserve(key string, start time.Time) {
	if d := start.Sub(p.spec.Earliest); d >= 0 {
		if k := int(d / p.spec.Slot); k <= p.last {
			p.take(k, p.subOf(key))
		}
	}
}

// Place gives the entity of key, covered by policy pol (nil: none), its window: from its
// preferred slot k₀, the first slot k ≥ k₀ whose window the policy allows, that starts at
// least the notice in force after its announcement (announceLead before it, or the plan's
// time plus Margin when that is later: so the notice must not exceed announceLead), that
// ends by the deadline, and that holds fewer than maxPerSlot windows and fewer than
// maxPerSlotPerSubscription of the entity's subscription. false: there is none.
func (p *Planner) Place(key string, pol *policy.Policy) (domain.Window, bool) {
	k := p.place(key, pol)
	if k < 0 {
		return domain.Window{}, false
	}
	return p.window(k), true
}

func (p *Planner) window(k int) domain.Window {
	s := p.SlotStart(k)
	return domain.Window{Start: s, End: s.Add(p.spec.Length)}
}

func (p *Planner) place(key string, pol *policy.Policy) int {
	notice := policy.NoticeInForce(pol, p.minNotice)
	if notice > p.spec.AnnounceLead {
		return -1
	}
	sub := p.subOf(key)
	for k := max(p.Preferred(key), p.firstAfter(p.now.Add(p.margin+notice))); k <= p.last; {
		if k = p.find(k); k > p.last {
			break
		}
		if p.subCap > 0 {
			if j := p.subFind(sub, k); j != k {
				k = j
				continue
			}
		}
		if pol != nil {
			if j := p.allowed(pol, k); j != k {
				k = j
				continue
			}
		}
		p.take(k, sub)
		return k
	}
	return -1
}

// firstAfter is the first slot that starts at or after t.
func (p *Planner) firstAfter(t time.Time) int {
	d := t.Sub(p.spec.Earliest)
	if d <= 0 {
		return 0
	}
	k := d / p.spec.Slot
	if d%p.spec.Slot != 0 {
		k++
	}
	return int(min(k, time.Duration(p.last+1)))
}

// find is the first slot ≥ k with room for one more window (last+1 when none), halving the
// paths it walks.
func (p *Planner) find(k int) int {
	for int(p.next[k]) != k {
		p.next[k] = p.next[p.next[k]]
		k = int(p.next[k])
	}
	return k
}

func (p *Planner) take(k int, sub uint32) {
	if p.count[k]++; p.count[k] >= int32(p.spec.MaxPerSlot) {
		p.next[k] = int32(k + 1)
	}
	if p.subCap > 0 {
		at := pair(sub, k)
		if p.subCount[at]++; p.subCount[at] >= p.subCap {
			p.subNext[at] = int32(k + 1)
		}
	}
}

func pair(sub uint32, k int) uint64 { return uint64(sub)<<32 | uint64(uint32(k)) }

// subOf numbers the subscription of the entity of key (0 when there is no cap to keep).
func (p *Planner) subOf(key string) uint32 {
	if p.subCap == 0 {
		return 0
	}
	s := SubscriptionKey(key)
	i, ok := p.subs[s]
	if !ok {
		i = uint32(len(p.subs))
		p.subs[s] = i
	}
	return i
}

// subFind is the first slot ≥ k where the subscription has room, compressing the path.
func (p *Planner) subFind(sub uint32, k int) int {
	j := k
	for {
		n, full := p.subNext[pair(sub, j)]
		if !full {
			break
		}
		j = int(n)
	}
	for k != j {
		at := pair(sub, k)
		k = int(p.subNext[at])
		p.subNext[at] = int32(j)
	}
	return j
}

// allowed is the first slot ≥ k whose window pol allows (last+1 when none). What it learns it
// keeps per policy: if r is the first allowed slot from k, it is also the first from every
// slot in [k, r], so each slot is asked about once per policy.
func (p *Planner) allowed(pol *policy.Policy, k int) int {
	m := p.memoOf(pol)
	if m != nil && m[k] >= 0 {
		return int(m[k])
	}
	r := p.last + 1
	if t, ok := pol.NextAllowedAligned(p.spec.Length, p.SlotStart(k), p.spec.Earliest, p.spec.Slot); ok {
		r = min(r, int(t.Sub(p.spec.Earliest)/p.spec.Slot))
	}
	for j := k; m != nil && j <= min(r, p.last) && m[j] < 0; j++ {
		m[j] = int32(r)
	}
	return r
}

func (p *Planner) memoOf(pol *policy.Policy) []int32 {
	if m, ok := p.memo[pol]; ok {
		return m
	}
	var m []int32
	if p.memoLeft >= p.Slots() {
		p.memoLeft -= p.Slots()
		m = make([]int32, p.Slots())
		for i := range m {
			m[i] = -1
		}
	}
	p.memo[pol] = m
	return m
}
