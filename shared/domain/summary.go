package domain

import (
	"bytes"
	"strconv"
	"time"
	"unicode/utf8"
)

// DecodeRecordSummary reads the part of a record that says where the entity stands: its
// resource ID, state, whether it is updating and its task, its window, when it entered its
// state, when it last changed, the sequence and stored time of its last command (a window's
// conflict with a policy is judged against when it was announced) and whether a Forget took it
// out of the signal. The history (recent
// command ids, the last event, admission, signing) is left out. The emitter and the notices
// function read every record on every tick and need nothing more; skipping the rest without
// decoding it costs a fraction of a full decode.
//
// A record as EncodeRecord writes it is read by a scanner made for it; anything it does not
// expect (escapes, unknown value types) is decoded by encoding/json instead, so the result is
// the same.
func DecodeRecordSummary(b []byte) (Record, error) {
	r, ok := summaryFast(b)
	if !ok {
		full, err := DecodeRecord(b)
		if err != nil {
			return Record{}, err
		}
		return Record{ResourceID: full.ResourceID, State: full.State, Updating: full.Updating, Task: full.Task,
			Window: full.Window, StateSince: full.StateSince, UpdatedAt: full.UpdatedAt, LastCommandSeq: full.LastCommandSeq,
			LastCommandAt: full.LastCommandAt, ForgottenAt: full.ForgottenAt}, nil
	}
	if r.State == "" {
		r.State = StateNone
	}
	return r, nil
}

// summaryFast reads the summary of a record in one pass; ok is false when b holds something
// it does not expect.
func summaryFast(b []byte) (r Record, ok bool) {
	s := &scanner{b: b}
	ok = s.members(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "resourceId":
			r.ResourceID, ok = s.text()
		case "state":
			var v string
			v, ok = s.text()
			r.State = internState(v)
		case "task":
			var v string
			v, ok = s.text()
			r.Task = Task(v)
		case "updating":
			r.Updating, ok = s.boolean()
		case "window":
			r.Window, ok = s.window()
		case "stateSince":
			r.StateSince, ok = s.time()
		case "updatedAt":
			r.UpdatedAt, ok = s.time()
		case "lastCommandSeq":
			r.LastCommandSeq, ok = s.uint()
		case "lastCommandAt":
			r.LastCommandAt, ok = s.time()
		case "forgottenAt":
			r.ForgottenAt, ok = s.time()
		default:
			// encoding/json matches keys regardless of case: one that does so differently is
			// left to it.
			ok = !summaryKey(key) && s.skip()
		}
		return ok
	})
	s.ws()
	return r, ok && s.i == len(s.b)
}

// summaryKeys are the keys summaryFast reads.
var summaryKeys = [][]byte{[]byte("resourceId"), []byte("state"), []byte("task"), []byte("updating"),
	[]byte("window"), []byte("stateSince"), []byte("updatedAt"), []byte("lastCommandSeq"),
	[]byte("lastCommandAt"), []byte("forgottenAt")}

// summaryKey reports whether key names a summary field in another case.
func summaryKey(key []byte) bool {
	for _, k := range summaryKeys {
		if len(k) == len(key) && bytes.EqualFold(k, key) {
			return true
		}
	}
	return false
}

// internState returns the constant for a known state, so that reading one allocates nothing.
func internState(v string) State {
	for _, s := range States {
		if string(s) == v {
			return s
		}
	}
	return State(v)
}

// scanner reads the JSON that encoding/json writes for a record. Its methods report false on
// anything else.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *scanner) next(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// members calls member for each key of an object, positioned at its value, which member must
// consume.
func (s *scanner) members(member func(key []byte) bool) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	for {
		s.ws()
		key, ok := s.raw()
		if !ok || !s.next(':') {
			return false
		}
		s.ws()
		if !member(key) {
			return false
		}
		if s.next('}') {
			return true
		}
		if !s.next(',') {
			return false
		}
	}
}

// raw reads a string of valid UTF-8 without escapes and returns its bytes.
func (s *scanner) raw() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	ascii := true
	for j := s.i + 1; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			v := s.b[s.i+1 : j]
			s.i = j + 1
			return v, ascii || utf8.Valid(v)
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

func (s *scanner) text() (string, bool) {
	v, ok := s.raw()
	return string(v), ok
}

func (s *scanner) boolean() (bool, bool) {
	switch {
	case s.literal("true"):
		return true, true
	case s.literal("false"):
		return false, true
	}
	return false, false
}

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

func (s *scanner) uint() (uint64, bool) {
	j := s.i
	for j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9' {
		j++
	}
	n, err := strconv.ParseUint(string(s.b[s.i:j]), 10, 64)
	s.i = j
	return n, err == nil
}

// time reads a time as encoding/json writes one (RFC 3339 with nanoseconds).
func (s *scanner) time() (time.Time, bool) {
	v, ok := s.raw()
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(v))
	return t, err == nil
}

// window reads a window, or null.
func (s *scanner) window() (*Window, bool) {
	if s.literal("null") {
		return nil, true
	}
	w := &Window{}
	ok := s.members(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "start":
			w.Start, ok = s.time()
		case "end":
			w.End, ok = s.time()
		default:
			ok = s.skip()
		}
		return ok
	})
	return w, ok
}

// skip passes over one value of any kind.
func (s *scanner) skip() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.skipString()
	case c == '{' || c == '[':
		return s.skipNested()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		j := s.i + 1
		for j < len(s.b) && (s.b[j] >= '0' && s.b[j] <= '9' || s.b[j] == '.' || s.b[j] == 'e' || s.b[j] == 'E' || s.b[j] == '+' || s.b[j] == '-') {
			j++
		}
		s.i = j
		return true
	}
	return false
}

// skipString passes over a string, escapes included.
func (s *scanner) skipString() bool {
	for j := s.i + 1; j < len(s.b); j++ {
		switch s.b[j] {
		case '\\':
			j++
		case '"':
			s.i = j + 1
			return true
		}
	}
	return false
}

// skipNested passes over an object or an array, counting brackets outside strings.
func (s *scanner) skipNested() bool {
	depth := 0
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '"':
			if !s.skipString() {
				return false
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				s.i++
				return true
			}
		}
		s.i++
	}
	return false
}
