package cli

import (
	"io"
	"os"
	"strconv"

	"golang.org/x/term"
)

// TerminalWidth is the width of the terminal w writes to, 0 when w is not a terminal (a pipe,
// a file, a buffer): then tables are printed whole. $COLUMNS (getenv) stands in when the
// terminal does not tell its size.
func TerminalWidth(w io.Writer, getenv func(string) string) int {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0
	}
	if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
		return cols
	}
	if n, err := strconv.Atoi(getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 80
}
