package natstest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// SaveContext writes a NATS CLI context as `nats context save` writes it (jsm.go natscontext:
// every field, empty ones included, indented by two spaces, mode 0600) into config, the NATS
// CLI's configuration directory (~/.config/nats), with the given fields set; with selectIt it
// also selects it, as `nats context select` does (config/context.txt).
func SaveContext(t testing.TB, config, name string, fields map[string]any, selectIt bool) {
	t.Helper()
	ctx := map[string]any{
		"description": "", "url": "", "socks_proxy": "", "token": "", "user": "", "password": "", "creds": "",
		"nkey": "", "cert": "", "key": "", "ca": "", "nsc": "", "jetstream_domain": "", "jetstream_api_prefix": "",
		"jetstream_event_prefix": "", "inbox_prefix": "", "user_jwt": "", "color_scheme": "", "tls_first": false,
	}
	for k, v := range fields {
		ctx[k] = v
	}
	if err := os.MkdirAll(filepath.Join(config, "context"), 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(ctx, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(config, "context", name+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if selectIt {
		if err := os.WriteFile(filepath.Join(config, "context.txt"), []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
