// Package cli holds what the verbs of maintctl share about a command line, so that every verb
// (and a new one) reads and prints the same way: durations with days and weeks and times as
// people write them (flag values), output formats (table, wide, name, json), and tables that
// fit a terminal, cut only when a person reads them there and whole when piped.
package cli
