package domain_test

import (
	"encoding/json"
	"testing"

	"maintsignals/shared/domain"
)

// FuzzDecodeCommand checks that no input crashes the decoder, that every rejection carries one
// of the four codes, and that whatever it accepts is a valid command that survives a round trip.
func FuzzDecodeCommand(f *testing.F) {
	key := domain.MustKey("/subscriptions/s/resourceGroups/rg/providers/p/c1")
	f.Add([]byte(`{"id":"a","resourceId":"/subscriptions/s/resourceGroups/rg/providers/p/c1","task":"Pending"}`), "")
	f.Add([]byte(`{"id":"a","resourceId":"/subscriptions/s/resourceGroups/rg/providers/p/c1","task":"UpdateFailed","error":"x"}`), "a")
	f.Add([]byte(`{"id":"a","resourceId":"/subscriptions/s/resourceGroups/rg/providers/p/c1","task":"Pending","window":{"start":"2026-01-01T00:00:00Z","end":"2026-01-02T00:00:00Z"}}`), "a")
	f.Add([]byte(`{"id":1}`), "")
	f.Add([]byte("\xff\xfe"), "")
	f.Add([]byte(`[]`), "x")
	f.Add([]byte(`{"id":"a","force":"true"}`), "")
	f.Fuzz(func(t *testing.T, body []byte, msgID string) {
		cmd, rej := domain.DecodeCommand(body, key, msgID)
		if rej != nil {
			switch rej.Code {
			case domain.CodeInvalidRequestContent, domain.CodeInvalidParameter:
			default:
				t.Fatalf("decoding gave code %s", rej.Code)
			}
			if rej.Message == "" {
				t.Fatal("rejection without a message")
			}
			if rej.Code == domain.CodeInvalidParameter && rej.Target == "" {
				t.Fatalf("InvalidParameter without a target: %v", rej)
			}
			return
		}
		if !domain.ValidID(cmd.ID) || !cmd.Task.Valid() {
			t.Fatalf("accepted an invalid command: %+v", cmd)
		}
		if k, err := domain.Key(cmd.ResourceID); err != nil || k != key {
			t.Fatalf("accepted a command for another key: %q (%v)", k, err)
		}
		b, err := json.Marshal(cmd)
		if err != nil {
			t.Fatal(err)
		}
		again, rej := domain.DecodeCommand(b, key, cmd.ID)
		if rej != nil {
			t.Fatalf("re-encoded command rejected: %v\n%s", rej, b)
		}
		if again.ID != cmd.ID || again.Task != cmd.Task || again.ResourceID != cmd.ResourceID || again.Error != cmd.Error || again.Force != cmd.Force {
			t.Fatalf("round trip changed the command: %+v -> %+v", cmd, again)
		}
	})
}
