package campaign

import (
	"fmt"
	"io"
	"strings"
	"time"

	"maintsignals/shared/domain"
)

// Render writes the plan for a person: what it plans, a histogram of the window starts, the
// skips by reason and the waves. It is what `campaign create --dry-run` prints.
func (p *Plan) Render(w io.Writer) error {
	s := p.spec
	var b strings.Builder
	fmt.Fprintf(&b, "Campaign %s: %s on %d entities: %d planned, %d skipped.\n", s.ID, s.Task, p.Len(), p.planned, p.Len()-p.planned)
	fmt.Fprintf(&b, "Windows of %s on %s slots from %s, preferred across %s, ending by %s.\n",
		domain.FormatDuration(s.Length), domain.FormatDuration(s.Slot), stamp(s.Earliest), domain.FormatDuration(s.Across), stamp(s.Deadline))
	caps := fmt.Sprintf("at most %d windows a slot", s.MaxPerSlot)
	if s.MaxPerSubscription > 0 {
		caps += fmt.Sprintf(", %d of a subscription", s.MaxPerSubscription)
	}
	fmt.Fprintf(&b, "Each announced %s before its window; %s.\n", domain.FormatDuration(s.AnnounceLead), caps)
	slots := p.Slots()
	if len(slots) > 0 {
		busiest := slots[0]
		for _, sc := range slots {
			if sc.Count > busiest.Count {
				busiest = sc
			}
		}
		fmt.Fprintf(&b, "Windows start from %s to %s in %d slots; the busiest holds %d (%s).\n",
			stamp(slots[0].Start), stamp(slots[len(slots)-1].Start), len(slots), busiest.Count, stamp(busiest.Start))
		b.WriteString(histogram(slots))
	}
	b.WriteString(p.renderSkips())
	b.WriteString(p.renderWaves())
	_, err := io.WriteString(w, b.String())
	return err
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 MST") }

// histogram counts the window starts per hour, day or week (the finest that fits in 62
// rows), each row with a bar scaled to the busiest.
func histogram(slots []SlotCount) string {
	first, last := slots[0].Start, slots[len(slots)-1].Start
	unit, label, layout := time.Hour, "hour", "2006-01-02 15:04"
	for _, u := range []struct {
		d             time.Duration
		label, layout string
	}{{domain.Day, "day", "2006-01-02"}, {domain.Week, "week from", "2006-01-02"}} {
		if last.Sub(first)/unit < 62 {
			break
		}
		unit, label, layout = u.d, u.label, u.layout
	}
	origin := first.Truncate(unit)
	rows := make([]int, last.Sub(origin)/unit+1)
	top := 0
	for _, sc := range slots {
		i := sc.Start.Sub(origin) / unit
		rows[i] += sc.Count
		top = max(top, rows[i])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nWindow starts per %s (UTC):\n", label)
	width := len(fmt.Sprint(top))
	for i, n := range rows {
		fmt.Fprintf(&b, "  %s  %s  %*d\n", origin.Add(time.Duration(i)*unit).Format(layout), bar(n, top, 40), width, n)
	}
	return b.String()
}

// bar is n of top drawn in width cells, in eighths of a cell, padded to width.
func bar(n, top, width int) string {
	eighths := 0
	if top > 0 {
		eighths = (n*width*8 + top - 1) / top
	}
	s := strings.Repeat("█", eighths/8)
	if r := eighths % 8; r > 0 {
		s += string([]rune("▏▎▍▌▋▊▉")[r-1])
	}
	return s + strings.Repeat(" ", width-(eighths+7)/8)
}

func (p *Plan) renderSkips() string {
	var b strings.Builder
	for _, r := range Reasons {
		if n := p.Skipped(r); n > 0 {
			fmt.Fprintf(&b, "  %-14s %d\n", r, n)
		}
	}
	if b.Len() == 0 {
		return "\nSkipped: none.\n"
	}
	return "\nSkipped (their records are not touched):\n" + b.String()
}

func (p *Plan) renderWaves() string {
	s := p.spec
	if !s.ExplicitWaves() {
		return ""
	}
	planned, total := make([]int, len(s.Waves)), make([]int, len(s.Waves))
	for i, w := range p.wave {
		if w >= 0 {
			total[w]++
			if p.slot[i] >= 0 {
				planned[w]++
			}
		}
	}
	var b strings.Builder
	b.WriteString("\nWaves, in order (each starts when the one before is finished):\n")
	for i, w := range s.Waves {
		fmt.Fprintf(&b, "  %-12s %d entities, %d planned", w.Name, total[i], planned[i])
		if w.Manual {
			b.WriteString("; waits for approve")
		}
		if w.Threshold.Set() {
			fmt.Fprintf(&b, "; halts when more than %s fail", w.Threshold)
		}
		b.WriteString("\n")
	}
	return b.String()
}
