// Package spectest helps the tests of campaign specs and of what plans them: the spec of the
// contract's example, edited field by field.
package spectest

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"maintsignals/shared/campaignspec"
)

// Example is the spec of the contract's fleet campaigns, with a real SHA-256.
const Example = `{"id": "pucm-2026-12", "reason": "PUCM: control plane upgrade", "task": "Everything",
 "selection": {"list": {"object": "pucm-2026-12", "sha256": "` + SHA + `", "count": 100000}, "prefixes": []},
 "window": {"length": "4h", "earliest": "2026-12-15T00:00:00Z", "deadline": "2027-01-15T00:00:00Z"},
 "spread": {"across": "336h", "slot": "15m", "maxPerSlot": 500, "maxPerSlotPerSubscription": 20, "seed": ""},
 "announceLead": "336h",
 "waves": [{"name": "canary", "prefixes": ["/subscriptions/aaaa"], "gate": "manual"},
           {"name": "rest", "failureThreshold": "2%"}]}`

// SHA is the SHA-256 of the list of Example.
const SHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// Edit returns the Example with the field at path (dotted, with [i] for elements) set to v,
// or removed when v is Del; more pairs of path and value follow.
func Edit(t testing.TB, path string, v any, more ...any) []byte {
	t.Helper()
	var doc any
	if err := json.Unmarshal([]byte(Example), &doc); err != nil {
		t.Fatal(err)
	}
	set(doc, path, v)
	for i := 0; i+1 < len(more); i += 2 {
		set(doc, more[i].(string), more[i+1])
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func set(doc any, path string, v any) {
	parts := strings.Split(strings.ReplaceAll(path, "[", ".["), ".")
	cur := doc
	for i, p := range parts {
		lastPart := i == len(parts)-1
		if strings.HasPrefix(p, "[") {
			n, _ := strconv.Atoi(strings.Trim(p, "[]"))
			arr := cur.([]any)
			if lastPart {
				arr[n] = v
				break
			}
			cur = arr[n]
			continue
		}
		m := cur.(map[string]any)
		if lastPart {
			if v == Del {
				delete(m, p)
			} else {
				m[p] = v
			}
			break
		}
		cur = m[p]
	}
}

type deletion struct{}

// Del, as the value of a path in Edit, removes the field.
var Del any = deletion{}

// MustSpec is the spec of body, or the test fails.
func MustSpec(t testing.TB, body []byte) *campaignspec.Spec {
	t.Helper()
	s, rej := campaignspec.ParseSpec(body)
	if rej != nil {
		t.Fatalf("ParseSpec: %v\n%s", rej, body)
	}
	return s
}

// UTC is the time s (RFC 3339); it panics when s is not one.
func UTC(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}
