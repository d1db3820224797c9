package campaign

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"

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
	var buf []byte
	for i := range p.Len() {
		buf = buf[:0]
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = p.appendAt(buf, i)
		bw.Write(append(buf, '\n'))
	}
	bw.WriteString("]}\n")
	return flush(bw)
}

// appendAt writes the i-th entry, as appendEntry would, without a placement on the heap.
func (p *Plan) appendAt(b []byte, i int) []byte {
	e := PlannedEntity{ResourceID: p.sel[i].ResourceID, Skipped: skipOf(p.slot[i])}
	var w domain.Window
	if e.Skipped == "" {
		w = p.planner.window(int(p.slot[i]))
		e.Window = &w
	}
	if p.spec.ExplicitWaves() && p.wave[i] >= 0 {
		e.Wave = p.spec.Waves[p.wave[i]].Name
	}
	return appendEntry(b, &e)
}

// appendEntry writes e as encoding/json would (without HTML escapes), without reflection: a
// plan of a million entities is written in a fraction of the time.
func appendEntry(b []byte, e *PlannedEntity) []byte {
	b = appendString(append(b, `{"resourceId":`...), e.ResourceID)
	if e.Window != nil {
		b = e.Window.Start.AppendFormat(append(b, `,"window":{"start":"`...), time.RFC3339Nano)
		b = e.Window.End.AppendFormat(append(b, `","end":"`...), time.RFC3339Nano)
		b = append(b, `"}`...)
	}
	if e.Skipped != "" {
		b = appendString(append(b, `,"skipped":`...), string(e.Skipped))
	}
	if e.Wave != "" {
		b = appendString(append(b, `,"wave":`...), e.Wave)
	}
	return append(b, '}')
}

// appendString writes s as a JSON string: quotes, backslashes and control bytes escaped
// (resource IDs are valid UTF-8, which JSON carries as it is).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

func flush(bw *bufio.Writer) error {
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	return nil
}
