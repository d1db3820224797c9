package campaign

import (
	"iter"
	"time"

	"maintsignals/shared/campaignspec"
	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// Reason is why the plan skips an entity.
type Reason string

// Reasons of a skip.
const (
	// NoAllowedSlot: no slot satisfies the entity's policy, notice, the deadline and the caps.
	NoAllowedSlot Reason = "NoAllowedSlot"
	// NoWave: the spec has waves, the last has prefixes, and none covers the entity.
	NoWave Reason = "NoWave"
)

// Reasons lists every reason, in the order they are reported.
var Reasons = []Reason{NoAllowedSlot, NoWave}

const (
	skipNoSlot = -1
	skipNoWave = -2
)

// Plan is the plan of a selection: a window or a skip for each entity, and the window starts
// of each slot. The same spec, selection, policies, settings and time give the same plan.
type Plan struct {
	spec    *campaignspec.Spec
	planner *Planner
	sel     Selection
	slot    []int32 // per entry: its slot, or skipNoSlot, skipNoWave
	wave    []int8
	planned int
	skipped [2]int
}

// NewPlan plans every entity of sel, in key order, at now: each in the first wave that covers
// it (skipped NoWave when none does), then at the first slot Planner.Place finds (skipped
// NoAllowedSlot when there is none). policies may be nil (no entity has a policy).
func NewPlan(s *campaignspec.Spec, sel Selection, policies Policies, set Settings, now time.Time) *Plan {
	p := &Plan{spec: s, planner: NewPlanner(s, set, now), sel: sel,
		slot: make([]int32, len(sel)), wave: make([]int8, len(sel))}
	for i, e := range sel {
		w := s.WaveOf(e.Key)
		p.wave[i] = int8(w)
		if w < 0 {
			p.slot[i] = skipNoWave
			p.skipped[1]++
			continue
		}
		var pol *policy.Policy
		if policies != nil {
			pol = policies(e.Key)
		}
		k := p.planner.place(e.Key, pol)
		p.slot[i] = int32(k)
		if k < 0 {
			p.skipped[0]++
			continue
		}
		p.planned++
	}
	return p
}

// Spec is the plan's spec.
func (p *Plan) Spec() *campaignspec.Spec { return p.spec }

// Len is the number of entities planned or skipped.
func (p *Plan) Len() int { return len(p.sel) }

// Planned is how many entities have a window.
func (p *Plan) Planned() int { return p.planned }

// Skipped is how many entities the plan skips for the reason.
func (p *Plan) Skipped(r Reason) int {
	switch r {
	case NoAllowedSlot:
		return p.skipped[0]
	case NoWave:
		return p.skipped[1]
	}
	return 0
}

// Placement is one entity's part of the plan.
type Placement struct {
	Key, ResourceID string
	Wave            int            // index in campaignspec.Spec.Waves, -1 for none
	Window          *domain.Window // nil when skipped
	Skipped         Reason         // "" when planned
}

// At is the placement of the i-th entity, in key order.
func (p *Plan) At(i int) Placement {
	e := p.sel[i]
	pl := Placement{Key: e.Key, ResourceID: e.ResourceID, Wave: int(p.wave[i]), Skipped: skipOf(p.slot[i])}
	if pl.Skipped == "" {
		w := p.planner.window(int(p.slot[i]))
		pl.Window = &w
	}
	return pl
}

// skipOf is the reason of a skip stored as a slot, "" for a slot.
func skipOf(k int32) Reason {
	switch k {
	case skipNoSlot:
		return NoAllowedSlot
	case skipNoWave:
		return NoWave
	}
	return ""
}

// All yields every placement in key order.
func (p *Plan) All() iter.Seq[Placement] {
	return func(yield func(Placement) bool) {
		for i := range p.sel {
			if !yield(p.At(i)) {
				return
			}
		}
	}
}

// Entity is the tracked record the plan gives the i-th entity: planned with its window, or
// skipped with the reason, in generation 1.
func (p *Plan) Entity(i int) Entity {
	pl := p.At(i)
	e := Entity{Phase: PhasePlanned, ResourceID: pl.ResourceID, Generation: 1, Window: pl.Window, Wave: pl.Wave}
	if pl.Window == nil {
		e.Phase, e.Reason = PhaseSkipped, string(pl.Skipped)
	}
	return e
}

// SlotCount is the number of windows that start at a slot.
type SlotCount struct {
	Start time.Time `json:"start"`
	Count int       `json:"count"`
}

// Slots lists the slots that hold windows, by start.
func (p *Plan) Slots() []SlotCount {
	var out []SlotCount
	for k, c := range p.planner.count {
		if c > 0 {
			out = append(out, SlotCount{Start: p.planner.SlotStart(k), Count: int(c)})
		}
	}
	return out
}
