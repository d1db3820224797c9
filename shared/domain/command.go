package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// Size limits, enforced before any other work.
const (
	MaxCommandBytes = 64 << 10
	MaxIDLength     = 128
	MaxReasonBytes  = 1024
	MaxErrorBytes   = 4096
	MaxActorBytes   = 256
)

var commandIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// Window is an announced maintenance window.
type Window struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// UnmarshalJSON reads a window as encoding/json would, and marks any error as the window's, so
// that a rejection names the window whatever part of it the time package refused.
func (w *Window) UnmarshalJSON(b []byte) error {
	type plain Window
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return &windowError{err}
	}
	*w = Window(p)
	return nil
}

// windowError is a window that does not decode; it reads as what went wrong.
type windowError struct{ err error }

func (e *windowError) Error() string { return e.err.Error() }
func (e *windowError) Unwrap() error { return e.err }

// Command is an admin or outcome command (README, Messaging contract).
type Command struct {
	ID         string  `json:"id"`
	ResourceID string  `json:"resourceId"`
	Task       Task    `json:"task"`
	Error      string  `json:"error,omitempty"`
	Reason     string  `json:"reason,omitempty"`
	Window     *Window `json:"window,omitempty"`
	Actor      string  `json:"actor,omitempty"`
	Force      bool    `json:"force,omitempty"`
	// IssuedAt (RFC 3339) is when the sender issued the command. A signed command must carry
	// it, inside the signed body: it bounds how long a captured command could be replayed.
	IssuedAt string `json:"issuedAt,omitempty"`
	// Campaign is set on a fleet campaign's Pending: the campaign whose window it announces.
	Campaign string `json:"campaign,omitempty"`
	// IfCampaign makes the command apply only while the entity's window is that campaign's
	// (a campaign withdraws its windows with it).
	IfCampaign string `json:"ifCampaign,omitempty"`

	// SignerKey is the public key that signed the command, once its signature is verified
	// (never read from the body).
	SignerKey string `json:"-"`
}

// Issued returns the parsed IssuedAt; false when absent (Validate has checked its form).
func (c Command) Issued() (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, c.IssuedAt)
	return t, err == nil
}

// ValidID reports whether id is a valid command id: 1–128 of [A-Za-z0-9_.:-].
func ValidID(id string) bool { return commandIDPattern.MatchString(id) }

// DecodeCommand reads a command body received on the subject of entity key, with msgID the
// value of its Nats-Msg-Id header ("" if none). It returns the command, or a Rejection with
// the code and field at fault. The checks run cheapest first: size, encoding, shape, fields.
func DecodeCommand(body []byte, key, msgID string) (Command, *Rejection) {
	var cmd Command
	if len(body) > MaxCommandBytes {
		return cmd, reject(CodeInvalidRequestContent, "", "body is %d bytes, at most %d", len(body), MaxCommandBytes)
	}
	if !utf8.Valid(body) {
		return cmd, reject(CodeInvalidRequestContent, "", "body is not valid UTF-8")
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		if json.Valid(trimmed) {
			return cmd, reject(CodeInvalidRequestContent, "", "body is not a JSON object")
		}
		return cmd, reject(CodeInvalidRequestContent, "", "body is not JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&cmd); err != nil {
		return Command{}, decodeRejection(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Command{}, reject(CodeInvalidRequestContent, "", "body has data after the JSON object")
	}
	if field := unknownField(trimmed, commandFields); field != "" {
		return Command{}, InvalidParameter(field, "unknown field %q", field)
	}
	if rej := cmd.Validate(key, msgID); rej != nil {
		return cmd, rej
	}
	return cmd, nil
}

func decodeRejection(err error) *Rejection {
	var (
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
		windowErr *windowError
	)
	isWindow := errors.As(err, &windowErr)
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if isWindow && field == "" {
			field = "window" // not an object
		}
		if field == "" {
			field = "body"
		}
		return InvalidParameter(field, "must be a JSON %s, got %s", jsonTypeName(typeErr.Type.Kind().String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return reject(CodeInvalidRequestContent, "", "body is not JSON: %v", err)
	case isWindow:
		// window.start or .end: a string that is not RFC 3339, or not a string at all.
		return InvalidParameter("window", "start and end must be RFC 3339 times: %v", err)
	default:
		return reject(CodeInvalidRequestContent, "", "body is not a valid command: %v", err)
	}
}

// fields are the keys a JSON object may carry: its fields' names, and for a field that is an
// object of its own, that object's.
type fields map[string]fields

var commandFields = jsonFields(reflect.TypeFor[Command]())

// jsonFields are the keys encoding/json reads into a struct of type t (window's included).
func jsonFields(t reflect.Type) fields {
	out := fields{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		var sub fields
		if ft := f.Type; ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct {
			sub = jsonFields(ft.Elem())
		}
		out[name] = sub
	}
	return out
}

// unknownField is the first key of the JSON object obj, in the order of the body, that known
// does not name ("" when every one is known), matched as encoding/json matches keys to fields:
// exactly, or else without regard to case. Fields that are objects are searched too.
func unknownField(obj []byte, known fields) string {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		var value json.RawMessage
		if err != nil || !ok || dec.Decode(&value) != nil {
			return ""
		}
		sub, found := lookupField(known, key)
		if !found {
			return key
		}
		if sub != nil {
			if f := unknownField(value, sub); f != "" {
				return f
			}
		}
	}
	return ""
}

func lookupField(known fields, key string) (fields, bool) {
	if sub, ok := known[key]; ok {
		return sub, true
	}
	for name, sub := range known {
		if strings.EqualFold(name, key) {
			return sub, true
		}
	}
	return nil, false
}

func jsonTypeName(kind string) string {
	switch kind {
	case "bool":
		return "boolean"
	case "struct", "ptr", "map":
		return "object"
	case "slice", "array":
		return "array"
	case "string":
		return "string"
	default:
		return kind
	}
}

// Validate checks the fields of a decoded command against the entity key of its subject and
// the Nats-Msg-Id header (msgID, "" if absent).
func (c *Command) Validate(key, msgID string) *Rejection {
	if rej := c.validateIdentity(key, msgID); rej != nil {
		return rej
	}
	return c.validateFields()
}

// validateIdentity checks what names the command and its entity: the id against the
// Nats-Msg-Id header, the resource ID against the subject's key.
func (c *Command) validateIdentity(key, msgID string) *Rejection {
	if rej := CheckID(c.ID, msgID); rej != nil {
		return rej
	}
	if c.ResourceID == "" {
		return InvalidParameter("resourceId", "is required")
	}
	k, err := Key(c.ResourceID)
	if err != nil {
		return InvalidParameter("resourceId", "%v", err)
	}
	if key != "" && k != key {
		return InvalidParameter("resourceId", "encodes to key %q, but the command was sent on subject key %q", truncate(k, 64), truncate(key, 64))
	}
	return nil
}

// validateFields checks the task and the fields that go with it.
func (c *Command) validateFields() *Rejection {
	switch {
	case c.Task == "":
		return InvalidParameter("task", "is required")
	case !c.Task.Valid():
		return InvalidParameter("task", "unknown task %q (tasks are matched exactly; one of %s)", truncate(string(c.Task), 64), taskList())
	}
	if c.Task == TaskUpdateFailed {
		if strings.TrimSpace(c.Error) == "" {
			return InvalidParameter("error", "is required with UpdateFailed")
		}
	} else if c.Error != "" {
		return InvalidParameter("error", "is allowed only with UpdateFailed")
	}
	if rej := checkText("error", c.Error, MaxErrorBytes); rej != nil {
		return rej
	}
	if rej := checkText("reason", c.Reason, MaxReasonBytes); rej != nil {
		return rej
	}
	if rej := CheckSender(c.Actor, c.IssuedAt); rej != nil {
		return rej
	}
	if rej := c.validateWindow(); rej != nil {
		return rej
	}
	return c.validateCampaign()
}

// CheckSender checks the fields every command carries about its sender: actor (at most
// MaxActorBytes, no control characters) and issuedAt (RFC 3339 when given).
func CheckSender(actor, issuedAt string) *Rejection {
	if len(actor) > MaxActorBytes {
		return InvalidParameter("actor", "is %d bytes, at most %d", len(actor), MaxActorBytes)
	}
	if hasControl(actor, false) {
		return InvalidParameter("actor", "contains control characters")
	}
	if issuedAt != "" {
		if _, err := time.Parse(time.RFC3339Nano, issuedAt); err != nil {
			return InvalidParameter("issuedAt", "must be an RFC 3339 time: %v", err)
		}
	}
	return nil
}

// CheckID checks a command id against the contract (1–128 of [A-Za-z0-9_.:-], required) and
// against the Nats-Msg-Id header msgID ("" when absent).
func CheckID(id, msgID string) *Rejection {
	switch {
	case id == "":
		return InvalidParameter("id", "is required")
	case !ValidID(id):
		return InvalidParameter("id", "must be 1-%d characters of [A-Za-z0-9_.:-]", MaxIDLength)
	case msgID != "" && msgID != id:
		return InvalidParameter("id", "differs from the Nats-Msg-Id header %q", truncate(msgID, 64))
	}
	return nil
}

// validateWindow checks the window: Pending may announce one (start and end); Reschedule
// needs one with a start, and its end may be left out (the window keeps its length).
func (c *Command) validateWindow() *Rejection {
	w := c.Window
	switch {
	case c.Task == TaskReschedule && (w == nil || w.Start.IsZero()):
		return InvalidParameter("window.start", "is required with %s", TaskReschedule)
	case w == nil:
		return nil
	case c.Task != TaskPending && c.Task != TaskReschedule:
		return InvalidParameter("window", "is allowed only with Pending and Reschedule")
	case c.Task == TaskPending && (w.Start.IsZero() || w.End.IsZero()):
		return InvalidParameter("window", "needs both start and end")
	case !w.End.IsZero() && !w.End.After(w.Start):
		return InvalidParameter("window.end", "must be after window.start")
	}
	return nil
}

func checkText(field, s string, max int) *Rejection {
	if len(s) > max {
		return InvalidParameter(field, "is %d bytes, at most %d", len(s), max)
	}
	if hasControl(s, true) {
		return InvalidParameter(field, "contains control characters")
	}
	return nil
}

func taskList() string {
	names := make([]string, 0, len(Tasks)+1)
	for _, t := range append(Tasks[:len(Tasks):len(Tasks)], TaskReschedule) {
		names = append(names, string(t))
	}
	return strings.Join(names, ", ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Encode marshals a command as JSON.
func (c Command) Encode() ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode command: %w", err)
	}
	return b, nil
}

// CheckNotice is the notice policy (README, Time in the signal): with a minimum notice, a Pending whose window
// starts earlier than handledAt + minNotice is refused on window.start, unless forced.
// handledAt is when the commands stream stored the command, not a replica's clock, so that
// every replica, and every redelivery, decides the same.
func CheckNotice(c Command, handledAt time.Time, minNotice time.Duration) *Rejection {
	if minNotice <= 0 || c.Force || c.Task != TaskPending || c.Window == nil {
		return nil
	}
	earliest := handledAt.Add(minNotice)
	if c.Window.Start.Before(earliest) {
		return InvalidParameter("window.start", "window starts at %s, less than the minimum notice of %s after the command was received (%s); announce it later, or force it",
			c.Window.Start.UTC().Format(time.RFC3339), minNotice, handledAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// ARMResourceIDPattern is a --resource-id-pattern for Azure Resource Manager IDs, offered in
// the docs rather than enforced by default (the contract takes any resource ID): a
// subscription, a resource group, a provider namespace and at least one type and name, any
// casing, no empty segment.
const ARMResourceIDPattern = `(?i)^/subscriptions/[0-9a-f-]+/resourcegroups/[^/]+/providers/[^/]+(/[^/]+/[^/]+)+$`

// CheckResourceIDPattern is a deployment's restriction of resource IDs (nil: none): a command
// whose resource ID does not match is refused InvalidParameter on resourceId. Forget is exempt,
// so that an entity created before the pattern was set can still be taken out of the signal.
func CheckResourceIDPattern(c Command, pattern *regexp.Regexp) *Rejection {
	if pattern == nil || c.Task == TaskForget || pattern.MatchString(c.ResourceID) {
		return nil
	}
	return InvalidParameter("resourceId", "%q does not match this deployment's resource ID pattern %s", truncate(c.ResourceID, 128), pattern)
}
