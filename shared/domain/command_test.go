package domain_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"maintsignals/shared/domain"
)

var aroKey = domain.MustKey(aroID)

// del marks a field to remove from the base command in cmdBody.
type del struct{}

// cmdBody builds a JSON command body: a valid Pending command for aroID, with overrides
// (a del{} value removes the field).
func cmdBody(overrides map[string]any) []byte {
	m := map[string]any{
		"id":         "cmd-1",
		"resourceId": aroID,
		"task":       "Pending",
	}
	for k, v := range overrides {
		if _, ok := v.(del); ok {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func window(start, end string) map[string]any {
	return map[string]any{"start": start, "end": end}
}

const (
	ws = "2025-04-01T02:00:00Z"
	we = "2025-04-01T06:00:00Z"
)

func TestDecodeCommand_Rejections(t *testing.T) {
	const ic, ip = domain.CodeInvalidRequestContent, domain.CodeInvalidParameter
	valid := string(cmdBody(nil))
	tests := []struct {
		name       string
		body       []byte
		key, msgID string
		code       domain.Code
		target     string
	}{
		// Size, encoding, shape: InvalidRequestContent, no target.
		{name: "body over 64 KiB", body: append(cmdBody(nil), make([]byte, domain.MaxCommandBytes)...), code: ic},
		{name: "body over 64 KiB of spaces", body: []byte(valid + strings.Repeat(" ", domain.MaxCommandBytes-len(valid)+1)), code: ic},
		{name: "body over 64 KiB inside a string", body: cmdBody(map[string]any{"reason": strings.Repeat("r", domain.MaxCommandBytes)}), code: ic},
		{name: "invalid UTF-8", body: []byte(`{"id":"cmd-1","resourceId":"/a\xff","task":"Pending"}`), code: ic},
		{name: "invalid UTF-8 outside strings", body: []byte("\xfe{}"), code: ic},
		{name: "empty body", body: []byte(""), code: ic},
		{name: "whitespace only", body: []byte(" \n\t "), code: ic},
		{name: "not JSON", body: []byte("task=Pending"), code: ic},
		{name: "truncated JSON object", body: []byte(`{"id":"cmd-1","task":`), code: ic},
		{name: "unquoted keys", body: []byte(`{id:"cmd-1"}`), code: ic},
		{name: "single quotes", body: []byte(`{'id':'cmd-1'}`), code: ic},
		{name: "JSON array", body: []byte(`[` + valid + `]`), code: ic},
		{name: "empty JSON array", body: []byte(`[]`), code: ic},
		{name: "JSON string", body: []byte(`"Pending"`), code: ic},
		{name: "JSON number", body: []byte(`42`), code: ic},
		{name: "JSON null", body: []byte(`null`), code: ic},
		{name: "JSON boolean", body: []byte(`true`), code: ic},
		{name: "trailing object", body: []byte(valid + `{}`), code: ic},
		{name: "trailing garbage", body: []byte(valid + ` x`), code: ic},
		{name: "trailing bracket", body: []byte(valid + `]`), code: ic},
		{name: "two commands", body: []byte(valid + "\n" + valid), code: ic},

		// Shape of fields: InvalidParameter on the field.
		{name: "unknown field", body: cmdBody(map[string]any{"foo": 1}), code: ip, target: "foo"},
		{name: "state is not a command field", body: cmdBody(map[string]any{"state": "None"}), code: ip, target: "state"},
		{name: "id as number", body: cmdBody(map[string]any{"id": 7}), code: ip, target: "id"},
		{name: "resourceId as object", body: cmdBody(map[string]any{"resourceId": map[string]any{}}), code: ip, target: "resourceId"},
		{name: "task as number", body: cmdBody(map[string]any{"task": 1}), code: ip, target: "task"},
		{name: "force as string", body: cmdBody(map[string]any{"force": "true"}), code: ip, target: "force"},
		{name: "force as number", body: cmdBody(map[string]any{"force": 1}), code: ip, target: "force"},
		{name: "reason as array", body: cmdBody(map[string]any{"reason": []string{"a"}}), code: ip, target: "reason"},
		{name: "actor as bool", body: cmdBody(map[string]any{"actor": true}), code: ip, target: "actor"},
		{name: "window as string", body: cmdBody(map[string]any{"window": ws}), code: ip, target: "window"},

		// id.
		{name: "missing id", body: cmdBody(map[string]any{"id": del{}}), code: ip, target: "id"},
		{name: "empty id", body: cmdBody(map[string]any{"id": ""}), code: ip, target: "id"},
		{name: "null id", body: cmdBody(map[string]any{"id": nil}), code: ip, target: "id"},
		{name: "id of 129 characters", body: cmdBody(map[string]any{"id": strings.Repeat("a", 129)}), code: ip, target: "id"},
		{name: "id with space", body: cmdBody(map[string]any{"id": "cmd 1"}), code: ip, target: "id"},
		{name: "id with slash", body: cmdBody(map[string]any{"id": "cmd/1"}), code: ip, target: "id"},
		{name: "id with control character", body: cmdBody(map[string]any{"id": "cmd\x01"}), code: ip, target: "id"},
		{name: "id with newline", body: cmdBody(map[string]any{"id": "cmd-1\n"}), code: ip, target: "id"},
		{name: "id with non-ASCII letter", body: cmdBody(map[string]any{"id": "cmd-é"}), code: ip, target: "id"},
		{name: "id with wildcard", body: cmdBody(map[string]any{"id": "cmd-*"}), code: ip, target: "id"},
		{name: "Nats-Msg-Id differs from id", body: cmdBody(nil), msgID: "cmd-2", code: ip, target: "id"},
		{name: "Nats-Msg-Id differs only in case", body: cmdBody(nil), msgID: "CMD-1", code: ip, target: "id"},

		// resourceId.
		{name: "missing resourceId", body: cmdBody(map[string]any{"resourceId": del{}}), code: ip, target: "resourceId"},
		{name: "empty resourceId", body: cmdBody(map[string]any{"resourceId": ""}), code: ip, target: "resourceId"},
		{name: "resourceId slash alone", body: cmdBody(map[string]any{"resourceId": "/"}), key: "-", code: ip, target: "resourceId"},
		{name: "resourceId of another entity", body: cmdBody(map[string]any{"resourceId": aroID + "2"}), code: ip, target: "resourceId"},
		{name: "resourceId for another subject key", body: cmdBody(nil), key: domain.MustKey("/other"), code: ip, target: "resourceId"},
		{name: "resourceId with control character", body: cmdBody(map[string]any{"resourceId": aroID + "\x07"}), code: ip, target: "resourceId"},
		{name: "resourceId with newline", body: cmdBody(map[string]any{"resourceId": "/a\nb"}), key: "a=0ab", code: ip, target: "resourceId"},
		{name: "resourceId too long", body: cmdBody(map[string]any{"resourceId": "/" + strings.Repeat("a", domain.MaxResourceIDBytes)}), key: strings.Repeat("a", domain.MaxResourceIDBytes), code: ip, target: "resourceId"},

		// task: matched exactly.
		{name: "missing task", body: cmdBody(map[string]any{"task": del{}}), code: ip, target: "task"},
		{name: "empty task", body: cmdBody(map[string]any{"task": ""}), code: ip, target: "task"},
		{name: "unknown task", body: cmdBody(map[string]any{"task": "Reboot"}), code: ip, target: "task"},
		{name: "lower-case pending", body: cmdBody(map[string]any{"task": "pending"}), code: ip, target: "task"},
		{name: "lower-case everything", body: cmdBody(map[string]any{"task": "everything"}), code: ip, target: "task"},
		{name: "upper-case NONE", body: cmdBody(map[string]any{"task": "NONE"}), code: ip, target: "task"},
		{name: "camel-case updateFailed", body: cmdBody(map[string]any{"task": "updateFailed", "error": "x"}), code: ip, target: "task"},
		{name: "task with surrounding space", body: cmdBody(map[string]any{"task": " Pending"}), code: ip, target: "task"},
		{name: "state name that is not a task", body: cmdBody(map[string]any{"task": "Planned"}), code: ip, target: "task"},

		// error: only and always with UpdateFailed.
		{name: "error with Pending", body: cmdBody(map[string]any{"error": "boom"}), code: ip, target: "error"},
		{name: "error with None", body: cmdBody(map[string]any{"task": "None", "error": "boom"}), code: ip, target: "error"},
		{name: "error with an update task", body: cmdBody(map[string]any{"task": "Everything", "error": "boom"}), code: ip, target: "error"},
		{name: "error with UpdateSucceeded", body: cmdBody(map[string]any{"task": "UpdateSucceeded", "error": "boom"}), code: ip, target: "error"},
		{name: "UpdateFailed without error", body: cmdBody(map[string]any{"task": "UpdateFailed"}), code: ip, target: "error"},
		{name: "UpdateFailed with empty error", body: cmdBody(map[string]any{"task": "UpdateFailed", "error": ""}), code: ip, target: "error"},
		{name: "UpdateFailed with blank error", body: cmdBody(map[string]any{"task": "UpdateFailed", "error": " \n "}), code: ip, target: "error"},
		{name: "error too long", body: cmdBody(map[string]any{"task": "UpdateFailed", "error": strings.Repeat("e", domain.MaxErrorBytes+1)}), code: ip, target: "error"},
		{name: "error with control character", body: cmdBody(map[string]any{"task": "UpdateFailed", "error": "bad\x00"}), code: ip, target: "error"},

		// window: only with Pending, end after start, RFC 3339.
		{name: "window with None", body: cmdBody(map[string]any{"task": "None", "window": window(ws, we)}), code: ip, target: "window"},
		{name: "window with CustomerActionNeeded", body: cmdBody(map[string]any{"task": "CustomerActionNeeded", "window": window(ws, we)}), code: ip, target: "window"},
		{name: "window with an update task", body: cmdBody(map[string]any{"task": "OperatorUpdate", "window": window(ws, we)}), code: ip, target: "window"},
		{name: "window with UpdateFailed", body: cmdBody(map[string]any{"task": "UpdateFailed", "error": "x", "window": window(ws, we)}), code: ip, target: "window"},
		{name: "window end before start", body: cmdBody(map[string]any{"window": window(we, ws)}), code: ip, target: "window.end"},
		{name: "window end equal to start", body: cmdBody(map[string]any{"window": window(ws, ws)}), code: ip, target: "window.end"},
		{name: "window end equal to start in another zone", body: cmdBody(map[string]any{"window": window("2025-04-01T02:00:00Z", "2025-04-01T04:00:00+02:00")}), code: ip, target: "window.end"},
		{name: "window start not RFC 3339", body: cmdBody(map[string]any{"window": window("tomorrow", we)}), code: ip, target: "window"},
		{name: "window end date only", body: cmdBody(map[string]any{"window": window(ws, "2025-04-02")}), code: ip, target: "window"},
		{name: "window end without zone", body: cmdBody(map[string]any{"window": window(ws, "2025-04-01T06:00:00")}), code: ip, target: "window"},
		{name: "window start as number", body: cmdBody(map[string]any{"window": map[string]any{"start": 1743472800, "end": we}}), code: ip, target: "window"},
		{name: "window start as bool", body: cmdBody(map[string]any{"window": map[string]any{"start": true, "end": we}}), code: ip, target: "window"},
		{name: "window empty object", body: cmdBody(map[string]any{"window": map[string]any{}}), code: ip, target: "window"},
		{name: "window without end", body: cmdBody(map[string]any{"window": map[string]any{"start": ws}}), code: ip, target: "window"},
		{name: "window without start", body: cmdBody(map[string]any{"window": map[string]any{"end": we}}), code: ip, target: "window"},
		{name: "unknown field after a wrong window", body: cmdBody(map[string]any{"window": window(we, ws), "zzz": 1}), code: ip, target: "zzz"},
		{name: "window with unknown field in another casing", body: cmdBody(map[string]any{"window": map[string]any{"START": ws, "end": we, "Zone": "UTC"}}), code: ip, target: "Zone"},
		{name: "signer key is not a command field", body: cmdBody(map[string]any{"SignerKey": "U123"}), code: ip, target: "SignerKey"},
		{name: "window with unknown field", body: cmdBody(map[string]any{"window": map[string]any{"start": ws, "end": we, "zone": "UTC"}}), code: ip, target: "zone"},

		// Free text limits.
		{name: "reason too long", body: cmdBody(map[string]any{"reason": strings.Repeat("r", domain.MaxReasonBytes+1)}), code: ip, target: "reason"},
		{name: "reason with control character", body: cmdBody(map[string]any{"reason": "bell\x07"}), code: ip, target: "reason"},
		{name: "reason with C1 control character", body: cmdBody(map[string]any{"reason": "x\u009bx"}), code: ip, target: "reason"},
		{name: "actor too long", body: cmdBody(map[string]any{"actor": strings.Repeat("a", domain.MaxActorBytes+1)}), code: ip, target: "actor"},
		{name: "actor with newline", body: cmdBody(map[string]any{"actor": "sre\nroot"}), code: ip, target: "actor"},
		{name: "actor with tab", body: cmdBody(map[string]any{"actor": "sre\troot"}), code: ip, target: "actor"},
		{name: "actor with escape", body: cmdBody(map[string]any{"actor": "sre\x1b[31m"}), code: ip, target: "actor"},
		{name: "actor with DEL", body: cmdBody(map[string]any{"actor": "sre\x7f"}), code: ip, target: "actor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := tt.key
			if key == "" {
				key = aroKey
			}
			_, rej := domain.DecodeCommand(tt.body, key, tt.msgID)
			if rej == nil {
				t.Fatalf("accepted %q", truncateForLog(tt.body))
			}
			if rej.Code != tt.code || rej.Target != tt.target {
				t.Fatalf("rejection = %s target %q (%s), want %s target %q", rej.Code, rej.Target, rej.Message, tt.code, tt.target)
			}
			if rej.Message == "" {
				t.Errorf("rejection without a message")
			}
		})
	}
}

func truncateForLog(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

func TestDecodeCommand_AcceptsValidCommandsOfEveryTask(t *testing.T) {
	start, _ := time.Parse(time.RFC3339, ws)
	end, _ := time.Parse(time.RFC3339, we)
	for _, task := range domain.Tasks {
		for _, force := range []bool{false, true} {
			t.Run(string(task)+"/force="+boolStr(force), func(t *testing.T) {
				o := map[string]any{"id": "cmd.2025-04-01:" + string(task), "task": string(task), "actor": "sre@example.com", "force": force}
				want := domain.Command{ID: "cmd.2025-04-01:" + string(task), ResourceID: aroID, Task: task, Actor: "sre@example.com", Force: force}
				switch task {
				case domain.TaskPending:
					o["window"] = window(ws, we)
					o["reason"] = "quarterly upgrade\nsee ticket 42"
					want.Window = &domain.Window{Start: start, End: end}
					want.Reason = "quarterly upgrade\nsee ticket 42"
				case domain.TaskUpdateFailed:
					o["error"] = "etcd backup failed:\n\ttimeout"
					want.Error = "etcd backup failed:\n\ttimeout"
				default:
					o["reason"] = "reason " + string(task)
					want.Reason = "reason " + string(task)
				}
				got, rej := domain.DecodeCommand(cmdBody(o), aroKey, want.ID)
				if rej != nil {
					t.Fatalf("rejected: %v", rej)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("decoded\n %+v\nwant\n %+v", got, want)
				}
			})
		}
	}
}

func TestDecodeCommand_AcceptsEdgeCases(t *testing.T) {
	tests := []struct {
		name       string
		body       []byte
		key, msgID string
	}{
		{name: "minimal command without header", body: cmdBody(nil)},
		{name: "header equal to id", body: cmdBody(nil), msgID: "cmd-1"},
		{name: "id of 128 characters", body: cmdBody(map[string]any{"id": strings.Repeat("a", 128)})},
		{name: "id of 1 character", body: cmdBody(map[string]any{"id": "x"})},
		{name: "id with every allowed character class", body: cmdBody(map[string]any{"id": "AZaz09_.:-"})},
		{name: "resourceId in another casing", body: cmdBody(map[string]any{"resourceId": strings.ToUpper(aroID)})},
		{name: "resourceId without leading slash", body: cmdBody(map[string]any{"resourceId": strings.TrimPrefix(aroID, "/")})},
		{name: "non-ASCII resourceId", body: cmdBody(map[string]any{"resourceId": "/Été/日本"}), key: domain.MustKey("/Été/日本")},
		{name: "Pending without window", body: cmdBody(map[string]any{"reason": "soon"})},
		{name: "Pending with null window", body: cmdBody(map[string]any{"window": nil})},
		{name: "window with offsets", body: cmdBody(map[string]any{"window": window("2025-04-01T02:00:00+02:00", "2025-04-01T01:00:01Z")})},
		{name: "window with fractional seconds", body: cmdBody(map[string]any{"window": window("2025-04-01T02:00:00.5Z", "2025-04-01T02:00:00.6Z")})},
		{name: "force false explicitly", body: cmdBody(map[string]any{"force": false})},
		{name: "reason at the limit", body: cmdBody(map[string]any{"reason": strings.Repeat("r", domain.MaxReasonBytes)})},
		{name: "error at the limit", body: cmdBody(map[string]any{"task": "UpdateFailed", "error": strings.Repeat("e", domain.MaxErrorBytes)})},
		{name: "actor at the limit", body: cmdBody(map[string]any{"actor": strings.Repeat("a", domain.MaxActorBytes)})},
		{name: "non-ASCII actor", body: cmdBody(map[string]any{"actor": "Zoë Ångström"})},
		{name: "surrounding whitespace", body: []byte("\n  " + string(cmdBody(nil)) + "  \n")},
		{name: "field names in another casing", body: []byte(`{"ID":"cmd-1","ResourceId":"` + aroID + `","TASK":"Pending","Window":{"Start":"` + ws + `","END":"` + we + `"}}`)},
		{
			name: "body of exactly 64 KiB",
			body: func() []byte {
				b := cmdBody(nil)
				return append(b, []byte(strings.Repeat(" ", domain.MaxCommandBytes-len(b)))...)
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := tt.key
			if key == "" {
				key = aroKey
			}
			if _, rej := domain.DecodeCommand(tt.body, key, tt.msgID); rej != nil {
				t.Fatalf("rejected: %v", rej)
			}
		})
	}
}

func TestCommand_EncodeDecodeRoundTrip(t *testing.T) {
	start, _ := time.Parse(time.RFC3339, ws)
	end, _ := time.Parse(time.RFC3339, we)
	cmds := []domain.Command{
		{ID: "a", ResourceID: aroID, Task: domain.TaskPending, Reason: "r", Window: &domain.Window{Start: start, End: end}, Actor: "me"},
		{ID: "b", ResourceID: aroID, Task: domain.TaskUpdateFailed, Error: "e", Force: true},
		{ID: "c", ResourceID: aroID, Task: domain.TaskEverything},
	}
	for _, c := range cmds {
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, rej := domain.DecodeCommand(b, aroKey, c.ID)
		if rej != nil {
			t.Fatalf("%s: %v", b, rej)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("round trip: got %+v, want %+v", got, c)
		}
	}
}

func TestValidID(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"a", true},
		{"A-Z_a.z:0-9", true},
		{strings.Repeat("x", 128), true},
		{"", false},
		{strings.Repeat("x", 129), false},
		{"a b", false},
		{"a/b", false},
		{"a*", false},
		{"a>", false},
		{"é", false},
		{"a\n", false},
	}
	for _, tt := range tests {
		if got := domain.ValidID(tt.id); got != tt.want {
			t.Errorf("ValidID(%q) = %t, want %t", tt.id, got, tt.want)
		}
	}
}

func TestRejection_ErrorNamesCodeAndTarget(t *testing.T) {
	r := domain.InvalidParameter("window.end", "must be after %s", "window.start")
	if r.Code != domain.CodeInvalidParameter || r.Target != "window.end" || r.Message != "must be after window.start" {
		t.Fatalf("InvalidParameter built %+v", r)
	}
	if got, want := r.Error(), "InvalidParameter (window.end): must be after window.start"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	r2 := &domain.Rejection{Code: domain.CodeRequestNotAllowed, Message: "no"}
	if got, want := r2.Error(), "RequestNotAllowed: no"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var err error = r
	if err.Error() == "" {
		t.Error("a Rejection is an error")
	}
}

func TestCodes_MatchSpec(t *testing.T) {
	codes := map[domain.Code]string{
		domain.CodeInvalidRequestContent: "InvalidRequestContent",
		domain.CodeInvalidParameter:      "InvalidParameter",
		domain.CodeRequestNotAllowed:     "RequestNotAllowed",
		domain.CodeUnauthorized:          "Unauthorized",
	}
	for c, want := range codes {
		if string(c) != want {
			t.Errorf("code %q, want %q", c, want)
		}
	}
}
