package cli

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Format is an output format of the -o flag.
type Format string

// The output formats. Table is for people and fits their terminal; Wide adds the columns that
// do not fit one, and cuts nothing; Name prints each row's name alone, one a line, for xargs and loops; JSON is
// for scripts (each verb encodes its own documents).
const (
	Table Format = "table"
	Wide  Format = "wide"
	Name  Format = "name"
	JSON  Format = "json"
)

// Formats lists the formats, for help and completion.
var Formats = []Format{Table, Wide, Name, JSON}

// ParseFormat reads an -o value.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("--output %q: use table, wide, name or json", s)
}

// Column is a column of a table.
type Column struct {
	Header string
	// Wide: shown only with -o wide.
	Wide bool
	// Shrink: on a terminal too narrow for the table, this column is cut (with "…"); the
	// widest shrinkable column gives way first.
	Shrink bool
	// Last: a shrinkable column cut only once the others cannot give way any more (a name,
	// which a person reads first, rather than a message).
	Last bool
}

// View is how a table is printed.
type View struct {
	Format    Format
	NoHeaders bool
	// Width is the terminal's width; 0 when the output is not a terminal: nothing is cut.
	Width int
}

// Tab is a table being filled: rows of cells, each row with a name (what -o name prints).
type Tab struct {
	cols  []Column
	names []string
	rows  [][]string
}

// NewTable starts a table with these columns.
func NewTable(cols ...Column) *Tab { return &Tab{cols: cols} }

// Row adds a row; its cells are put on one line each (whitespace runs become one space), and
// an empty cell is written "-".
func (t *Tab) Row(name string, cells ...string) {
	row := make([]string, len(t.cols))
	for i := range row {
		c := "-"
		if i < len(cells) {
			if s := strings.Join(strings.Fields(cells[i]), " "); s != "" {
				c = s
			}
		}
		row[i] = c
	}
	t.names, t.rows = append(t.names, name), append(t.rows, row)
}

// Len is the number of rows.
func (t *Tab) Len() int { return len(t.rows) }

// gap is the space between two columns.
const gap = 2

// Write prints the table as v says (v.Format Table, Wide or Name).
func (t *Tab) Write(w io.Writer, v View) error {
	if v.Format == Name {
		var b strings.Builder
		for _, n := range t.names {
			b.WriteString(n)
			b.WriteByte('\n')
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	cols := t.visible(v.Format == Wide)
	widths := t.widths(cols, !v.NoHeaders)
	if v.Width > 0 && v.Format != Wide {
		// Wide asks for everything: whole, even on a terminal.
		fit(t.cols, cols, widths, v.Width)
	}
	var b strings.Builder
	line := func(cell func(c int) string) {
		for i, c := range cols {
			s := cut(cell(c), widths[i])
			b.WriteString(s)
			if i < len(cols)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(s)+gap))
			}
		}
		b.WriteByte('\n')
	}
	if !v.NoHeaders {
		line(func(c int) string { return t.cols[c].Header })
	}
	for _, row := range t.rows {
		line(func(c int) string { return row[c] })
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// visible lists the indexes of the columns shown.
func (t *Tab) visible(wide bool) []int {
	var out []int
	for i, c := range t.cols {
		if wide || !c.Wide {
			out = append(out, i)
		}
	}
	return out
}

// widths are the natural widths of the shown columns: their longest cell.
func (t *Tab) widths(cols []int, headers bool) []int {
	out := make([]int, len(cols))
	for i, c := range cols {
		if headers {
			out[i] = utf8.RuneCountInString(t.cols[c].Header)
		}
		for _, row := range t.rows {
			out[i] = max(out[i], utf8.RuneCountInString(row[c]))
		}
	}
	return out
}

// minShrunk is the narrowest a shrinkable column gets (or its header, when wider).
const minShrunk = 8

// fit narrows the shrinkable columns, widest first (the Last ones only when the others are
// as narrow as they get), until the table fits width or none can give way any more.
func fit(all []Column, cols []int, widths []int, width int) {
	total := gap * (len(cols) - 1)
	for _, w := range widths {
		total += w
	}
	for _, last := range []bool{false, true} {
		for total > width {
			widest := -1
			for i, c := range cols {
				floor := max(minShrunk, utf8.RuneCountInString(all[c].Header))
				if all[c].Shrink && (last || !all[c].Last) && widths[i] > floor && (widest < 0 || widths[i] > widths[widest]) {
					widest = i
				}
			}
			if widest < 0 {
				break
			}
			widths[widest]--
			total--
		}
	}
}

// cut shortens s to n runes, the last one an ellipsis.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
