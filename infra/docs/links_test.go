package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"maintsignals/shared/domain"
)

// mdLink matches an inline Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// documents are the README and every document here, relative to this directory.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join("..", "..", "README.md")}, docs...)
}

// TestDocuments_EveryRelativeLinkResolves follows every relative link of the README and of
// the documents to its file, and every #fragment to a heading of that file.
func TestDocuments_EveryRelativeLinkResolves(t *testing.T) {
	for _, doc := range documents(t) {
		body, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(stripCode(string(body)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %q: %v", doc, target, err)
				continue
			}
			if frag == "" {
				continue
			}
			linked, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s: link %q: %v", doc, target, err)
				continue
			}
			if !anchors(string(linked))[frag] {
				t.Errorf("%s: link %q: %s has no heading with the anchor #%s", doc, target, path, frag)
			}
		}
	}
}

// TestDocuments_EveryDocumentIsLinkedFromTheReadme keeps the documents findable.
func TestDocuments_EveryDocumentIsLinkedFromTheReadme(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := filepath.Glob("*.md")
	for _, d := range docs {
		if !strings.Contains(string(readme), "(infra/docs/"+d) {
			t.Errorf("README.md does not link infra/docs/%s", d)
		}
	}
}

// stripCode drops fenced code blocks, whose brackets are not links.
func stripCode(s string) string {
	var out strings.Builder
	fenced := false
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out.WriteString(line)
			out.WriteByte('\n')
		}
	}
	return out.String()
}

// anchors are the fragment ids GitHub gives the headings of a document: lower case, spaces as
// hyphens, punctuation dropped; a repeated heading gets -1, -2, ...
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(stripCode(doc), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := slug(text)
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestContract_OffersTheARMPatternOfTheCode: the pattern the contract offers is the one the
// code defines and tests.
func TestContract_OffersTheARMPatternOfTheCode(t *testing.T) {
	body, err := os.ReadFile("contract.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), "\n"+domain.ARMResourceIDPattern+"\n") {
		t.Errorf("contract.md does not offer the pattern domain.ARMResourceIDPattern:\n%s", domain.ARMResourceIDPattern)
	}
}
