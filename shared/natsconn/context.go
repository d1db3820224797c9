package natsconn

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// EnvContext names the NATS CLI context to use, as the nats CLI reads it.
const EnvContext = "NATS_CONTEXT"

// ErrContext is wrapped by every failure to use a NATS CLI context.
var ErrContext = errors.New("NATS context")

// Context is a NATS CLI context, a file the nats CLI writes (`nats context save NAME …`) under
// $XDG_CONFIG_HOME/nats/context/NAME.json, else ~/.config/nats/context/NAME.json, and selects
// with `nats context select NAME` (the name in …/nats/context.txt). Its file paths may start
// with ~ and name environment variables, as the nats CLI allows.
type Context struct {
	Name string `json:"-"`
	Path string `json:"-"`

	Description   string `json:"description"`
	URL           string `json:"url"`
	SocksProxy    string `json:"socks_proxy"`
	Token         string `json:"token"`
	User          string `json:"user"`
	Password      string `json:"password"`
	Creds         string `json:"creds"`
	NKey          string `json:"nkey"`
	Cert          string `json:"cert"`
	Key           string `json:"key"`
	CA            string `json:"ca"`
	NSC           string `json:"nsc"`
	JSDomain      string `json:"jetstream_domain"`
	JSAPIPrefix   string `json:"jetstream_api_prefix"`
	JSEventPrefix string `json:"jetstream_event_prefix"`
	InboxPrefix   string `json:"inbox_prefix"`
	UserJWT       string `json:"user_jwt"`
	ColorScheme   string `json:"color_scheme"`
	TLSFirst      bool   `json:"tls_first"`
}

// contextDir is where the nats CLI keeps its configuration; "" when there is no home.
func contextDir(getenv func(string) string) string {
	if d := getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "nats")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "nats")
	}
	return ""
}

// KnownContexts lists the names of the saved contexts, sorted.
func KnownContexts(getenv func(string) string) []string {
	dir := contextDir(getenv)
	if dir == "" {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(dir, "context", "*.json"))
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	slices.Sort(names)
	return names
}

// LoadContext reads the context called name; "" is the one $NATS_CONTEXT names, else the one
// the nats CLI has selected. It returns nil, and no error, when no context is named or
// selected.
func LoadContext(name string, getenv func(string) string) (*Context, error) {
	dir := contextDir(getenv)
	if name == "" {
		name = getenv(EnvContext)
	}
	if name == "" && dir != "" {
		b, _ := os.ReadFile(filepath.Join(dir, "context.txt"))
		name = strings.TrimSpace(string(b))
	}
	if name == "" {
		return nil, nil
	}
	if dir == "" {
		return nil, fmt.Errorf("%w %q: no $HOME or $XDG_CONFIG_HOME to find it in", ErrContext, name)
	}
	if strings.ContainsAny(name, `/\`) || strings.Contains(name, "..") {
		return nil, fmt.Errorf("%w %q: not a context name", ErrContext, name)
	}
	c := &Context{Name: name, Path: filepath.Join(dir, "context", name+".json")}
	b, err := os.ReadFile(c.Path)
	if errors.Is(err, os.ErrNotExist) {
		known := "none is saved: `nats context save NAME --server URL …`"
		if k := KnownContexts(getenv); len(k) > 0 {
			known = "known: " + strings.Join(k, ", ")
		}
		return nil, fmt.Errorf("%w %q: no %s (%s)", ErrContext, name, c.Path, known)
	}
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrContext, name, err)
	}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("%w %q: %s: %w", ErrContext, name, c.Path, err)
	}
	return c, nil
}

// Fill gives o the context's settings where o has none: flags and environment variables,
// already in o, override the context. Settings this client cannot honour are an error rather
// than a connection made without them.
func (c *Context) Fill(o *Options, getenv func(string) string) error {
	for _, u := range []struct{ field, value string }{
		{"nsc", c.NSC}, {"socks_proxy", c.SocksProxy}, {"jetstream_domain", c.JSDomain},
		{"jetstream_api_prefix", c.JSAPIPrefix}, {"user_jwt", c.UserJWT},
	} {
		if u.value != "" {
			return fmt.Errorf("%w %q (%s): %s is not supported here; make a context without it, or give --server and the credential flags", ErrContext, c.Name, c.Path, u.field)
		}
	}
	path := func(p string) string {
		if strings.HasPrefix(p, "~/") || p == "~" {
			p = getenv("HOME") + p[1:]
		}
		return os.Expand(p, getenv)
	}
	fill := func(dst *string, v string) {
		if *dst == "" {
			*dst = v
		}
	}
	fill(&o.Servers, c.URL)
	// One way to authenticate: the context's only when neither a flag nor a variable gave one.
	if o.CredsFile == "" && o.NkeyFile == "" && o.User == "" && o.Token == "" {
		o.CredsFile, o.NkeyFile = path(c.Creds), path(c.NKey)
		o.User, o.Password, o.Token = c.User, c.Password, c.Token
	}
	if o.CertFile == "" && o.KeyFile == "" {
		o.CertFile, o.KeyFile = path(c.Cert), path(c.Key)
	}
	fill(&o.CAFile, path(c.CA))
	fill(&o.InboxPrefix, c.InboxPrefix)
	o.TLSFirst = o.TLSFirst || c.TLSFirst
	return nil
}
