package campaign

import (
	"slices"
	"strings"
	"time"

	"maintsignals/shared/campaignspec"
	"maintsignals/shared/policy"
)

// Keyed is an entity with its key.
type Keyed struct {
	Key    string
	Entity Entity
}

// holdsSlot reports whether an entity's window counts in its slot: it will happen, is
// happening or happened (a cancelled, superseded, cleared or rejected window will not).
func holdsSlot(p Phase) bool {
	switch p {
	case PhasePlanned, PhaseAnnounced, PhaseOverdue, PhaseInProgress, PhaseSucceeded, PhaseFailed:
		return true
	}
	return false
}

// Replan gives a window to every entity that needs one (NeedsPlan: retried, withdrawn too
// near its window, or planned when its wave opened too late), at now, in key order, as
// NewPlan would, around the windows the campaign's other entities hold (each counted in its
// slot, so the caps hold for all together). It returns the entities it changed, in key
// order: planned with a window, or skipped (NoAllowedSlot, NoWave).
func Replan(s *campaignspec.Spec, set Settings, now time.Time, entities []Keyed, policies Policies) []Keyed {
	p := NewPlanner(s, set, now)
	var needy []Keyed
	for _, k := range entities {
		switch e := k.Entity; {
		case e.NeedsPlan():
			needy = append(needy, k)
		case e.Window != nil && holdsSlot(e.Phase):
			p.Reserve(k.Key, e.Window.Start)
		}
	}
	slices.SortFunc(needy, func(a, b Keyed) int { return strings.Compare(a.Key, b.Key) })
	for i := range needy {
		e := &needy[i].Entity
		if e.Wave < 0 {
			e.Phase, e.Reason = PhaseSkipped, string(NoWave)
			continue
		}
		var pol *policy.Policy
		if policies != nil {
			pol = policies(needy[i].Key)
		}
		if w, ok := p.Place(needy[i].Key, pol); ok {
			e.Window = &w
			continue
		}
		e.Phase, e.Reason = PhaseSkipped, string(NoAllowedSlot)
	}
	return needy
}
