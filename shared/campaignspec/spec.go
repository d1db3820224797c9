package campaignspec

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"maintsignals/shared/domain"
)

// Spec is a compiled campaign spec: its document read and checked, ready to plan with. It is
// immutable once compiled.
type Spec struct {
	ID       string
	Reason   string
	Task     domain.Task
	List     *ListRef
	Prefixes []Prefix

	Length             time.Duration
	Earliest, Deadline time.Time // UTC
	Across, Slot       time.Duration
	MaxPerSlot         int
	MaxPerSubscription int // 0: no cap of its own (maxPerSlot bounds it)
	Seed               string
	AnnounceLead       time.Duration

	// Waves are the waves in order; a spec without waves has one implicit wave (name "",
	// no prefixes) that takes every entity.
	Waves         []Wave
	explicitWaves bool
}

// Wave is a compiled wave.
type Wave struct {
	Name      string
	Prefixes  []Prefix // none: the rest (only the last wave)
	Manual    bool     // gate: manual
	Threshold Threshold
}

// ExplicitWaves reports whether the spec names its waves, rather than having the one
// implicit wave.
func (s *Spec) ExplicitWaves() bool { return s.explicitWaves }

// PreferredSlots is across / slot: how many slots the preferred slots spread over.
func (s *Spec) PreferredSlots() int { return int(s.Across / s.Slot) }

// WaveOf is the index of the wave of the entity of key: the first wave, in order, one of whose
// prefixes covers it, or the last wave when it has no prefixes; -1 when none does (the entity
// is skipped, NoWave).
func (s *Spec) WaveOf(key string) int {
	for i, w := range s.Waves {
		if len(w.Prefixes) == 0 || coveredBy(w.Prefixes, key) {
			return i
		}
	}
	return -1
}

// WaveIndex is the index of the wave named name; false when there is none.
func (s *Spec) WaveIndex(name string) (int, bool) {
	for i, w := range s.Waves {
		if w.Name == name && s.explicitWaves {
			return i, true
		}
	}
	return -1, false
}

// Compile checks every field of the document and compiles it; a rejection (InvalidParameter)
// names the field: id, reason, task, selection…, window.length, window.earliest,
// window.deadline, spread.across, spread.slot, spread.maxPerSlot,
// spread.maxPerSlotPerSubscription, spread.seed, announceLead, waves, waves[i]….
func (d Document) Compile() (*Spec, *domain.Rejection) {
	s := &Spec{ID: d.ID, Reason: d.Reason, Task: d.Task}
	switch {
	case d.ID == "":
		return nil, domain.InvalidParameter("id", "is required")
	case !ValidID(d.ID):
		return nil, domain.InvalidParameter("id", "must be 1-%d characters of [a-z0-9-], got %q", MaxIDLength, domain.Truncate(d.ID, 64))
	case len(d.Reason) > domain.MaxReasonBytes:
		return nil, domain.InvalidParameter("reason", "is %d bytes, at most %d", len(d.Reason), domain.MaxReasonBytes)
	case domain.HasControl(d.Reason, true):
		return nil, domain.InvalidParameter("reason", "contains control characters")
	case d.Task == "":
		return nil, domain.InvalidParameter("task", "is required")
	case d.Task.Kind() != domain.KindUpdate:
		return nil, domain.InvalidParameter("task", "must be an update task (%s), got %q", taskNames(), domain.Truncate(string(d.Task), 64))
	}
	for _, step := range []func(*Spec, Document) *domain.Rejection{compileSelection, compileWindow, compileSpread, compileLead, compileWaves} {
		if rej := step(s, d); rej != nil {
			return nil, rej
		}
	}
	return s, nil
}

func compileSelection(s *Spec, d Document) *domain.Rejection {
	sel := d.Selection
	if sel.List == nil && len(sel.Prefixes) == 0 {
		return domain.InvalidParameter("selection", "needs a list, prefixes, or both")
	}
	if l := sel.List; l != nil {
		switch {
		case l.Object == "" || len(l.Object) > MaxObjectBytes || domain.HasControl(l.Object, false):
			return domain.InvalidParameter("selection.list.object", "must be an object name of 1-%d bytes without control characters", MaxObjectBytes)
		case !sha256Pattern.MatchString(l.SHA256):
			return domain.InvalidParameter("selection.list.sha256", "must be a SHA-256 in 64 lower-case hex digits")
		case l.Count < 1 || l.Count > MaxEntities:
			return domain.InvalidParameter("selection.list.count", "must be from 1 to %d, got %d", MaxEntities, l.Count)
		}
		ref := *l
		s.List = &ref
	}
	var rej *domain.Rejection
	s.Prefixes, rej = compilePrefixes(sel.Prefixes, "selection.prefixes")
	return rej
}

var sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

func compileWindow(s *Spec, d Document) *domain.Rejection {
	var rej *domain.Rejection
	if s.Length, rej = durationField("window.length", d.Window.Length, MinLength, MaxLength); rej != nil {
		return rej
	}
	if s.Earliest, rej = timeField("window.earliest", d.Window.Earliest); rej != nil {
		return rej
	}
	if s.Deadline, rej = timeField("window.deadline", d.Window.Deadline); rej != nil {
		return rej
	}
	switch span := s.Deadline.Sub(s.Earliest); {
	case span < s.Length:
		return domain.InvalidParameter("window.deadline", "must be at least window.length (%s) after window.earliest", domain.FormatDuration(s.Length))
	case span > MaxSpan:
		return domain.InvalidParameter("window.deadline", "must be at most %s after window.earliest", domain.FormatDuration(MaxSpan))
	}
	return nil
}

func compileSpread(s *Spec, d Document) *domain.Rejection {
	sp := d.Spread
	var rej *domain.Rejection
	if s.Slot, rej = durationField("spread.slot", sp.Slot, MinSlot, MaxSpan); rej != nil {
		return rej
	}
	if s.Across, rej = durationField("spread.across", sp.Across, s.Slot, MaxSpan); rej != nil {
		return rej
	}
	switch {
	case s.Across%s.Slot != 0:
		return domain.InvalidParameter("spread.across", "must be a whole number of slots (%s), got %s", domain.FormatDuration(s.Slot), domain.FormatDuration(s.Across))
	case s.Across-s.Slot+s.Length > s.Deadline.Sub(s.Earliest):
		return domain.InvalidParameter("spread.across", "the window of the last preferred slot (window.earliest + %s - %s) must end by window.deadline",
			domain.FormatDuration(s.Across), domain.FormatDuration(s.Slot))
	case sp.MaxPerSlot < 1 || sp.MaxPerSlot > MaxPerSlotCap:
		return domain.InvalidParameter("spread.maxPerSlot", "must be from 1 to %d, got %d", MaxPerSlotCap, sp.MaxPerSlot)
	case sp.MaxPerSlotPerSubscription < 0 || sp.MaxPerSlotPerSubscription > sp.MaxPerSlot:
		return domain.InvalidParameter("spread.maxPerSlotPerSubscription", "must be from 1 to spread.maxPerSlot (%d), or 0 or absent for no cap of its own; got %d", sp.MaxPerSlot, sp.MaxPerSlotPerSubscription)
	case len(sp.Seed) > MaxSeedBytes || domain.HasControl(sp.Seed, false):
		return domain.InvalidParameter("spread.seed", "must be at most %d bytes without control characters", MaxSeedBytes)
	}
	s.MaxPerSlot, s.MaxPerSubscription = sp.MaxPerSlot, sp.MaxPerSlotPerSubscription
	s.Seed = sp.Seed
	if s.Seed == "" {
		s.Seed = s.ID
	}
	return nil
}

func compileLead(s *Spec, d Document) *domain.Rejection {
	var rej *domain.Rejection
	s.AnnounceLead, rej = durationField("announceLead", d.AnnounceLead, 0, MaxLead)
	return rej
}

func compileWaves(s *Spec, d Document) *domain.Rejection {
	if len(d.Waves) == 0 {
		s.Waves = []Wave{{}}
		return nil
	}
	if len(d.Waves) > MaxWaves {
		return domain.InvalidParameter("waves", "has %d waves, at most %d", len(d.Waves), MaxWaves)
	}
	s.explicitWaves = true
	for i, wd := range d.Waves {
		w, rej := compileWave(wd, fmt.Sprintf("waves[%d]", i), i == len(d.Waves)-1)
		if rej != nil {
			return rej
		}
		for j := range i {
			if s.Waves[j].Name == w.Name {
				return domain.InvalidParameter(fmt.Sprintf("waves[%d].name", i), "%q is also the name of waves[%d]", w.Name, j)
			}
		}
		s.Waves = append(s.Waves, w)
	}
	return nil
}

func compileWave(wd WaveDocument, at string, last bool) (Wave, *domain.Rejection) {
	w := Wave{Name: wd.Name}
	switch {
	case wd.Name == "":
		return w, domain.InvalidParameter(at+".name", "is required")
	case !ValidID(wd.Name):
		return w, domain.InvalidParameter(at+".name", "must be 1-%d characters of [a-z0-9-], got %q", MaxIDLength, domain.Truncate(wd.Name, 64))
	case wd.Gate != "" && wd.Gate != GateManual:
		return w, domain.InvalidParameter(at+".gate", "must be %q or absent, got %q", GateManual, domain.Truncate(wd.Gate, 64))
	case len(wd.Prefixes) == 0 && !last:
		return w, domain.InvalidParameter(at+".prefixes", "are required: only the last wave may have none (it takes the rest)")
	}
	w.Manual = wd.Gate == GateManual
	var rej *domain.Rejection
	if w.Threshold, rej = ParseThreshold(wd.FailureThreshold); rej != nil {
		rej.Target = at + ".failureThreshold"
		return w, rej
	}
	w.Prefixes, rej = compilePrefixes(wd.Prefixes, at+".prefixes")
	return w, rej
}

func durationField(target, s string, lo, hi time.Duration) (time.Duration, *domain.Rejection) {
	if s == "" {
		return 0, domain.InvalidParameter(target, "is required")
	}
	d, err := domain.ParseDuration(s)
	if err != nil {
		return 0, domain.InvalidParameter(target, "%v", err)
	}
	if d < lo || d > hi {
		return 0, domain.InvalidParameter(target, "must be from %s to %s, got %s", domain.FormatDuration(lo), domain.FormatDuration(hi), s)
	}
	return d, nil
}

func timeField(target, s string) (time.Time, *domain.Rejection) {
	if s == "" {
		return time.Time{}, domain.InvalidParameter(target, "is required")
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, domain.InvalidParameter(target, "must be an RFC 3339 time such as 2026-12-15T00:00:00Z, got %q", domain.Truncate(s, 64))
	}
	return t.UTC(), nil
}

func taskNames() string {
	names := make([]string, len(domain.UpdateTasks))
	for i, t := range domain.UpdateTasks {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}
