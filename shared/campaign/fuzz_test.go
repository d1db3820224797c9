package campaign_test

import (
	"bytes"
	"testing"

	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/campaignspec/spectest"
)

// A campaign command or a list from anyone never panics the reader, and a spec accepted once
// is accepted again from its canonical form, as the same campaign.
func FuzzDecodeControl(f *testing.F) {
	f.Add(control(campaign.ActionCreate, `, "spec": `+spectest.Example))
	f.Add(control(campaign.ActionPause, `, "withdraw": true`))
	f.Add(control(campaign.ActionRetry, `, "phase": "failed"`))
	f.Add([]byte(`{"id": "x", "campaign": "pucm-2026-12", "action": "create", "spec": {"waves": [{"name": "a", "prefixes": [1]}]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, rej := campaign.DecodeControl(body, "pucm-2026-12", "")
		if rej != nil || c.Compiled() == nil {
			return
		}
		again, rej := campaignspec.ParseSpec(c.Compiled().Canonical())
		if rej != nil || again.Digest() != c.Compiled().Digest() {
			t.Fatalf("the canonical form of an accepted spec: %v\n%s", rej, c.Compiled().Canonical())
		}
	})
}

func FuzzParseList(f *testing.F) {
	f.Add([]byte("# fleet\n/subscriptions/a/c1\r\n\n  /subscriptions/A/C1 \n"))
	f.Add([]byte("\ufeff/x\n/\x00\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		l, err := campaign.ParseList(bytes.NewReader(body))
		if err != nil {
			return
		}
		for i := 1; i < len(l.Entries); i++ {
			if l.Entries[i-1].Key >= l.Entries[i].Key {
				t.Fatalf("entries not sorted and unique by key: %q, %q", l.Entries[i-1].Key, l.Entries[i].Key)
			}
		}
	})
}
