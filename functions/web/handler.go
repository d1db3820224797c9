package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
)

// Handler serves the view's pages (for tests, or to mount them elsewhere). Only GET and HEAD
// are served, but for the sign-in form that sets the token cookie.
func (v *View) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", v.fleetPage)
	mux.HandleFunc("GET /entities/{key...}", v.entityPage)
	mux.HandleFunc("GET /campaigns", v.operatorOnly(v.campaignsPage))
	mux.HandleFunc("GET /campaigns/{id}", v.operatorOnly(v.campaignPage))
	mux.Handle("GET /assets/", assets())
	mux.HandleFunc("GET /signin", v.signinPage)
	mux.HandleFunc("POST /signin", v.signin)
	v.apiRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			v.fail(w, r, http.StatusMethodNotAllowed, "this view is read-only")
			return
		}
		v.noPage(w, r)
	})
	return v.secure(mux)
}

func (v *View) noPage(w http.ResponseWriter, r *http.Request) {
	v.fail(w, r, http.StatusNotFound, "no page at "+r.URL.Path)
}

// operatorOnly serves h to the operator; to a customer the page does not exist. The campaigns
// span tenants: their counts cannot be cut to a customer's scopes (the view keeps a hash of
// each campaign entity's key, not the key).
func (v *View) operatorOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if viewer(r) != nil {
			v.noPage(w, r)
			return
		}
		h(w, r)
	}
}

// tokenCookie carries the bearer token of a browser that signed in.
const tokenCookie = "maint_web_token"

// viewerKey is the request context's key of the customer who asks.
type viewerKey struct{}

// viewer is the holder of the customer token r carries; nil for the operator's token, or in
// a view that takes no token: they see the whole fleet.
func viewer(r *http.Request) *Customer {
	c, _ := r.Context().Value(viewerKey{}).(*Customer)
	return c
}

// secure sets the headers every answer carries and, with tokens, lets through only requests
// that carry one (the assets and the sign-in form excepted: they reveal nothing), marked with
// the customer who holds it.
func (v *View) secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Vary", "Accept")
		if !strings.HasPrefix(r.URL.Path, "/assets/") {
			h.Set("Cache-Control", "no-store")
		}
		open := strings.HasPrefix(r.URL.Path, "/assets/") || r.URL.Path == "/signin"
		if v.cfg.tokens.any() && !open {
			c, ok := v.holder(r)
			if !ok {
				v.unauthorized(w, r)
				return
			}
			if c != nil {
				r = r.WithContext(context.WithValue(r.Context(), viewerKey{}, c))
			}
		}
		next.ServeHTTP(w, r)
	})
}

// holder finds who holds the token r carries, as a bearer token or in the cookie: the
// customer, or nil for the operator.
func (v *View) holder(r *http.Request) (*Customer, bool) {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		c, err := r.Cookie(tokenCookie)
		if err != nil {
			return nil, false
		}
		got = c.Value
	}
	return v.cfg.tokens.lookup(strings.TrimSpace(got))
}

func (v *View) unauthorized(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="maintsignals"`)
	if negotiate(r) == formatHTML && r.Method == http.MethodGet && !isAPI(r) {
		v.html(w, r, http.StatusUnauthorized, "signin", layout{Title: "Sign in", Body: signinForm{Next: r.URL.RequestURI()}})
		return
	}
	v.fail(w, r, http.StatusUnauthorized, "this view needs its bearer token (Authorization: Bearer …)")
}

// signinForm is the form that asks a browser for the token.
type signinForm struct {
	Next  string
	Wrong bool
}

func (v *View) signinPage(w http.ResponseWriter, r *http.Request) {
	v.html(w, r, http.StatusOK, "signin", layout{Title: "Sign in", Body: signinForm{Next: localPath(r.URL.Query().Get("next"))}})
}

// signin checks the token a person pasted (the operator's or a customer's) and keeps it in a
// cookie that only this view reads (HttpOnly, SameSite=Strict; Secure over TLS).
func (v *View) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	next := localPath(r.PostFormValue("next"))
	token := strings.TrimSpace(r.PostFormValue("token"))
	if _, ok := v.cfg.tokens.lookup(token); !ok {
		v.html(w, r, http.StatusUnauthorized, "signin", layout{Title: "Sign in", Body: signinForm{Next: next, Wrong: v.cfg.tokens.any()}})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: token, Path: "/", HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// localPath is p when it is a path of this site, else "/": a sign-in never sends a browser
// elsewhere.
func localPath(p string) string {
	u, err := url.Parse(p)
	if err != nil || p == "" || u.IsAbs() || u.Host != "" || !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.Contains(p, `\`) {
		return "/"
	}
	return p
}
