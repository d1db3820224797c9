package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"maintsignals/shared/domain"
)

// Limits of a policy document.
const (
	MaxDocumentBytes = domain.MaxCommandBytes
	MaxWindows       = 20
	MaxBlackouts     = 20
	MaxRRuleBytes    = 256
	MaxBlackoutDays  = 90
	MaxReasonBytes   = domain.MaxReasonBytes
)

// Document is a policy as it is written, sent and stored: the JSON of the README (customers'
// maintenance policies). Durations and times stay as written; Compile reads them.
type Document struct {
	Scope           string     `json:"scope"`
	TimeZone        string     `json:"timeZone,omitempty"`
	Windows         []Window   `json:"windows,omitempty"`
	Blackouts       []Blackout `json:"blackouts,omitempty"`
	MinNotice       string     `json:"minNotice,omitempty"`
	AllowReschedule bool       `json:"allowReschedule,omitempty"`
}

// Window is an allowed window: a recurrence rule without DTSTART, a local start time HH:MM and
// a duration of elapsed time.
type Window struct {
	RRule    string `json:"rrule"`
	Start    string `json:"start"`
	Duration string `json:"duration"`
}

// Blackout is a span of local dates, end exclusive, when no maintenance may happen.
type Blackout struct {
	Start  string `json:"start"`
	End    string `json:"end"`
	Reason string `json:"reason,omitempty"`
}

// The keys each object may carry, exactly as written (no other casing).
var (
	documentKeys = []string{"scope", "timeZone", "windows", "blackouts", "minNotice", "allowReschedule"}
	windowKeys   = []string{"rrule", "start", "duration"}
	blackoutKeys = []string{"start", "end", "reason"}
)

// wireDocument reads the arrays element by element, so that an error names its index.
type wireDocument struct {
	Scope           string            `json:"scope"`
	TimeZone        string            `json:"timeZone"`
	Windows         []json.RawMessage `json:"windows"`
	Blackouts       []json.RawMessage `json:"blackouts"`
	MinNotice       string            `json:"minNotice"`
	AllowReschedule bool              `json:"allowReschedule"`
}

// Decode reads a policy document strictly: one JSON object, with no key unknown, repeated or
// cased otherwise than documented, each field of its JSON type. A rejection names the field at
// fault ("windows[1].start", "blackouts[0]"). It does not check the values: Compile does.
func Decode(body []byte) (Document, *domain.Rejection) {
	if rej := checkBody(body, "policy"); rej != nil {
		return Document{}, rej
	}
	var w wireDocument
	if rej := decodeObject(body, "policy", "", documentKeys, &w); rej != nil {
		return Document{}, rej
	}
	doc := Document{Scope: w.Scope, TimeZone: w.TimeZone, MinNotice: w.MinNotice, AllowReschedule: w.AllowReschedule}
	for i, raw := range w.Windows {
		var win Window
		if rej := decodeObject(raw, fmt.Sprintf("windows[%d]", i), fmt.Sprintf("windows[%d].", i), windowKeys, &win); rej != nil {
			return Document{}, rej
		}
		doc.Windows = append(doc.Windows, win)
	}
	for i, raw := range w.Blackouts {
		var b Blackout
		target := fmt.Sprintf("blackouts[%d]", i)
		if rej := decodeObject(raw, target, target+".", blackoutKeys, &b); rej != nil {
			rej.Target = target // blackouts are judged whole
			return Document{}, rej
		}
		doc.Blackouts = append(doc.Blackouts, b)
	}
	return doc, nil
}

// checkBody refuses a body (what: "policy", "body") that is too large, not UTF-8 or not JSON.
func checkBody(body []byte, what string) *domain.Rejection {
	var msg string
	switch {
	case len(body) > MaxDocumentBytes:
		msg = fmt.Sprintf("%s is %d bytes, at most %d", what, len(body), MaxDocumentBytes)
	case !utf8.Valid(body):
		msg = what + " is not valid UTF-8"
	case !json.Valid(body):
		msg = what + " is not JSON"
	default:
		return nil
	}
	return &domain.Rejection{Code: domain.CodeInvalidRequestContent, Message: msg}
}

// decodeObject reads the JSON object raw into v, refusing keys not in known; errors name
// prefix+field, or self when raw itself is at fault.
func decodeObject(raw []byte, self, prefix string, known []string, v any) *domain.Rejection {
	if rej := checkKeys(raw, self, prefix, known); rej != nil {
		return rej
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return domain.InvalidParameter(prefix+typeErr.Field, "must be a JSON %s, got %s", jsonType(typeErr.Type.Kind().String()), typeErr.Value)
		}
		return domain.InvalidParameter(self, "%v", err)
	}
	return nil
}

// checkKeys walks the keys of the object raw in the order written and refuses the first that
// known does not name exactly, or that comes twice (two readers could take different ones).
func checkKeys(raw []byte, self, prefix string, known []string) *domain.Rejection {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return domain.InvalidParameter(self, "must be a JSON object")
	}
	seen := make(map[string]bool, len(known))
	for dec.More() {
		t, err := dec.Token()
		key, _ := t.(string)
		var skip json.RawMessage
		if err != nil || dec.Decode(&skip) != nil {
			return domain.InvalidParameter(self, "is not a valid JSON object")
		}
		switch {
		case !contains(known, key):
			return domain.InvalidParameter(prefix+key, "unknown field %q (fields: %v)", key, known)
		case seen[key]:
			return domain.InvalidParameter(prefix+key, "field %q is given twice", key)
		}
		seen[key] = true
	}
	if _, err := dec.Token(); err != nil {
		return domain.InvalidParameter(self, "is not a valid JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return domain.InvalidParameter(self, "has data after the JSON object")
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func jsonType(kind string) string {
	switch kind {
	case "bool":
		return "boolean"
	case "slice":
		return "array"
	case "struct":
		return "object"
	}
	return kind
}

// Encode marshals the document as it is stored: the value of its scope's key in the bucket.
func (d Document) Encode() ([]byte, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode policy: %w", err)
	}
	return b, nil
}
