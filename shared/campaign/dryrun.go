package campaign

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"maintsignals/shared/domain"
)

// DryRun is the JSON of `campaign create --dry-run -o json`: the counts, the window starts of
// each slot that holds any, and with --plan every entity's window or skip.
type DryRun struct {
	Entities int             `json:"entities"`
	Planned  int             `json:"planned"`
	Skipped  map[Reason]int  `json:"skipped"` // every reason, 0 included
	Slots    []SlotCount     `json:"slots"`
	Plan     []PlannedEntity `json:"plan,omitempty"`
}

// PlannedEntity is one entry of DryRun.Plan: a window, or the reason of the skip. Wave is the
// wave's name when the spec has waves.
type PlannedEntity struct {
	ResourceID string         `json:"resourceId"`
	Window     *domain.Window `json:"window,omitempty"`
	Skipped    Reason         `json:"skipped,omitempty"`
	Wave       string         `json:"wave,omitempty"`
}

// Summary is the dry run without its plan.
func (p *Plan) Summary() DryRun {
	d := DryRun{Entities: p.Len(), Planned: p.planned, Skipped: map[Reason]int{}, Slots: p.Slots()}
	for _, r := range Reasons {
		d.Skipped[r] = p.Skipped(r)
	}
	if d.Slots == nil {
		d.Slots = []SlotCount{}
	}
	return d
}

func (p *Plan) entry(pl Placement) PlannedEntity {
	e := PlannedEntity{ResourceID: pl.ResourceID, Window: pl.Window, Skipped: pl.Skipped}
	if p.spec.explicitWaves && pl.Wave >= 0 {
		e.Wave = p.spec.Waves[pl.Wave].Name
	}
	return e
}

// WriteJSON writes the dry run as JSON, with the plan when withPlan, one entry a line, in key
// order: the same plan always writes the same bytes. The plan is streamed, not built whole.
func (p *Plan) WriteJSON(w io.Writer, withPlan bool) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	head, err := json.Marshal(p.Summary())
	if err != nil {
		return fmt.Errorf("encode plan: %w", err)
	}
	if !withPlan || p.Len() == 0 {
		bw.Write(head)
		bw.WriteByte('\n')
		return flush(bw)
	}
	bw.Write(head[:len(head)-1]) // without its closing brace
	bw.WriteString(`,"plan":[` + "\n")
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for i := range p.Len() {
		if i > 0 {
			bw.WriteByte(',')
		}
		if err := enc.Encode(p.entry(p.At(i))); err != nil {
			return fmt.Errorf("encode plan: %w", err)
		}
	}
	bw.WriteString("]}\n")
	return flush(bw)
}

func flush(bw *bufio.Writer) error {
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	return nil
}
