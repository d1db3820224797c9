package web

import (
	"crypto/subtle"
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
	mux.HandleFunc("GET /campaigns", v.campaignsPage)
	mux.HandleFunc("GET /campaigns/{id}", v.campaignPage)
	mux.Handle("GET /assets/", assets())
	mux.HandleFunc("GET /signin", v.signinPage)
	mux.HandleFunc("POST /signin", v.signin)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			v.fail(w, r, http.StatusMethodNotAllowed, "this view is read-only")
			return
		}
		v.fail(w, r, http.StatusNotFound, "no page at "+r.URL.Path)
	})
	return v.secure(mux)
}

// tokenCookie carries the bearer token of a browser that signed in.
const tokenCookie = "maint_web_token"

// secure sets the headers every answer carries and, with a token, lets through only requests
// that carry it (the assets and the sign-in form excepted: they reveal nothing).
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
		if v.cfg.token != "" && !open && !v.authorized(r) {
			v.unauthorized(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authorized reports whether r carries the token: as a bearer token, or in the cookie.
func (v *View) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		c, err := r.Cookie(tokenCookie)
		if err != nil {
			return false
		}
		got = c.Value
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(v.cfg.token)) == 1
}

func (v *View) unauthorized(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="maintsignals"`)
	if negotiate(r) == formatHTML && r.Method == http.MethodGet {
		v.html(w, http.StatusUnauthorized, "signin", layout{Title: "Sign in", Body: signinForm{Next: r.URL.RequestURI()}})
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
	v.html(w, http.StatusOK, "signin", layout{Title: "Sign in", Body: signinForm{Next: localPath(r.URL.Query().Get("next"))}})
}

// signin checks the token a person pasted and keeps it in a cookie that only this view
// reads (HttpOnly, SameSite=Strict; Secure over TLS).
func (v *View) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	next := localPath(r.PostFormValue("next"))
	token := strings.TrimSpace(r.PostFormValue("token"))
	if v.cfg.token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(v.cfg.token)) != 1 {
		v.html(w, http.StatusUnauthorized, "signin", layout{Title: "Sign in", Body: signinForm{Next: next, Wrong: v.cfg.token != ""}})
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
