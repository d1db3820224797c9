package web

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// pages are the parsed templates, one set per page (each with the layout).
type pages struct {
	sets map[string]*template.Template
}

var pageNames = []string{"fleet", "entity", "campaigns", "campaign", "error", "signin"}

func newPages(v *View) (*pages, error) {
	base, err := template.New("layout.html").Funcs(v.funcs()).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("web templates: %w", err)
	}
	p := &pages{sets: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("web template %s: %w", name, err)
		}
		p.sets[name] = t
	}
	return p, nil
}

// layout is what every page's template gets.
type layout struct {
	Title string
	Nav   string // "fleet" or "campaigns": the current section
	Live  bool   // the page follows its changes
	At    time.Time
	Seq   uint64 // the changes published when the page was rendered
	// Viewer is the name of the customer whose token the request carries ("" the operator):
	// its pages leave out what is not its own (the campaigns).
	Viewer string
	Body   any
}

// format is what a request asks for.
type format int

const (
	formatHTML format = iota
	formatJSON
	formatEvents
)

// negotiate picks the most preferred of HTML, JSON and server-sent events from Accept;
// anything else, or nothing, is HTML.
func negotiate(r *http.Request) format {
	best, bestQ := formatHTML, -1.0
	for part := range strings.SplitSeq(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if s, ok := params["q"]; ok {
			if q, err = strconv.ParseFloat(s, 64); err != nil {
				continue
			}
		}
		f, ok := map[string]format{"text/html": formatHTML, "application/json": formatJSON,
			"text/event-stream": formatEvents, "*/*": formatHTML, "text/*": formatHTML}[mt]
		if ok && q > 0 && q > bestQ {
			best, bestQ = f, q
		}
	}
	return best
}

// html renders page name with body, for the viewer of r.
func (v *View) html(w http.ResponseWriter, r *http.Request, status int, name string, l layout) {
	l.At, l.Seq = v.cfg.Now().UTC(), v.live.seq.Load()
	if c := viewer(r); c != nil {
		// The count of changes is the whole fleet's: a customer is not told it, and its live
		// page refreshes once as its stream opens instead.
		l.Viewer, l.Seq = c.Name, 0
	}
	var b bytes.Buffer
	if err := v.pages.sets[name].ExecuteTemplate(&b, "layout.html", l); err != nil {
		v.log.Error("render page", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// json writes body as JSON.
func (v *View) json(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		v.log.Error("encode page", "error", err)
		http.Error(w, "the page could not be encoded", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// answer serves a page, l.Body as JSON or l as HTML, as r asks.
func (v *View) answer(w http.ResponseWriter, r *http.Request, name string, l layout) {
	if negotiate(r) == formatJSON {
		v.json(w, http.StatusOK, l.Body)
		return
	}
	v.html(w, r, http.StatusOK, name, l)
}

// errorBody is the JSON of an error.
type errorBody struct {
	Status  int    `json:"status"`
	Message string `json:"error"`
}

// fail answers an error in the format asked for.
func (v *View) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if isAPI(r) {
		v.problem(w, status, "", msg)
		return
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "2")
	}
	if negotiate(r) == formatJSON {
		v.json(w, status, errorBody{Status: status, Message: msg})
		return
	}
	if negotiate(r) == formatEvents {
		http.Error(w, msg, status)
		return
	}
	v.html(w, r, status, "error", layout{Title: http.StatusText(status), Body: errorBody{Status: status, Message: msg}})
}

// assets serves the embedded style sheet and script.
func assets() http.Handler {
	sub, _ := fs.Sub(assetFS, "assets")
	files := http.FileServerFS(sub)
	return http.StripPrefix("/assets/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		files.ServeHTTP(w, r)
	}))
}
