package arch_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/hmdp-go/seckill/infra"
)

// documents are the pages a reader meets: README, deploy/README and docs/.
func documents(t *testing.T) (root string, docs []string) {
	t.Helper()
	root = filepath.Join("..", "..")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return root, append(docs, filepath.Join(root, "README.md"), filepath.Join(root, "deploy", "README.md"))
}

var (
	linkRe    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRe = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	fenceRe   = regexp.MustCompile("(?s)```.*?```")
)

// slug is the anchor GitHub gives a heading: lower case, punctuation gone,
// spaces as hyphens.
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

func anchorsOf(t *testing.T, path string, cache map[string]map[string]bool) map[string]bool {
	t.Helper()
	if a, ok := cache[path]; ok {
		return a
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a := map[string]bool{}
	for _, m := range headingRe.FindAllStringSubmatch(fenceRe.ReplaceAllString(string(b), ""), -1) {
		s := slug(m[1])
		for n := 1; a[s]; n++ { // GitHub numbers repeated headings
			s = slug(m[1]) + "-" + string(rune('0'+n))
		}
		a[s] = true
	}
	cache[path] = a
	return a
}

// TestDocsLinksResolve: every relative link of the documents names a file
// of the repository, and every #anchor a heading of the page it points to.
// A page renamed, or a heading reworded, fails here rather than in a
// reader's browser.
func TestDocsLinksResolve(t *testing.T) {
	root, docs := documents(t)
	cache := map[string]map[string]bool{}
	checked := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		for _, m := range linkRe.FindAllStringSubmatch(fenceRe.ReplaceAllString(string(b), ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(target, "#")
			file := doc
			if path != "" {
				file = filepath.Join(filepath.Dir(doc), path)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s links %s, which does not exist", rel, target)
					continue
				}
				if !strings.HasPrefix(filepath.Clean(file), filepath.Clean(root)+string(filepath.Separator)) && filepath.Clean(file) != filepath.Clean(root) {
					t.Errorf("%s links %s, outside the repository", rel, target)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(file, ".md") && !anchorsOf(t, file, cache)[anchor] {
				t.Errorf("%s links %s: no heading of %s has that anchor", rel, target, filepath.Base(file))
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d links: the scan no longer finds them", checked)
	}
}

// TestDocsNameTheVariablesTheCodeReads: every SECKILL_* variable a document
// names is one the service reads (or a test's) — a removed one only in
// docs/CONFIGURATION.md's list of removals —, docs/CONFIGURATION.md lists
// every variable the service reads, and the default it gives is the code's.
func TestDocsNameTheVariablesTheCodeReads(t *testing.T) {
	root, docs := documents(t)
	known := map[string]string{}
	for _, v := range infra.ConfigVariables() {
		known[v.Name] = v.Default
	}
	// A name, not a family (SECKILL_RATE_*).
	varRe := regexp.MustCompile(`SECKILL_[A-Z0-9_]*[A-Z0-9]\b(?:_\*)?`)
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		for _, name := range varRe.FindAllString(string(b), -1) {
			if strings.HasSuffix(name, "_*") || name == misspeltExample {
				continue
			}
			// Unknown to the service and to its tools (tests, the bench).
			if len(infra.UnknownVariables([]string{name + "=x"})) > 0 {
				t.Errorf("%s names %s, which neither the service nor its tools read", rel, name)
			}
			// Removed this release: named only where the removal is told.
			if len(infra.RemovedVariables([]string{name + "=x"})) > 0 && rel != filepath.Join("docs", "CONFIGURATION.md") {
				t.Errorf("%s names %s, which this release removed (it is infra.Tuning's now)", rel, name)
			}
		}
	}

	b, err := os.ReadFile(filepath.Join(root, "docs", "CONFIGURATION.md"))
	if err != nil {
		t.Fatal(err)
	}
	// A row names one variable, or several ("`A` / `B`") whose defaults
	// follow in the same order ("`0` / `500ms`").
	rowRe := regexp.MustCompile("(?m)^\\| (`SECKILL_[^|]+) \\| ([^|]*) \\|")
	listed := map[string]bool{}
	for _, m := range rowRe.FindAllStringSubmatch(string(b), -1) {
		names := strings.Split(m[1], " / ")
		cells := strings.Split(strings.TrimSpace(m[2]), " / ")
		for i, n := range names {
			name := strings.Trim(strings.TrimSpace(n), "`")
			listed[name] = true
			def, ok := known[name]
			if !ok || def == "" || len(cells) != len(names) {
				// Unknown: reported above. An empty default is described
				// in words ("embedded", "seckill-<hostname>").
				continue
			}
			// The default's code span, perhaps explained after it.
			if cell := strings.TrimSpace(cells[i]); !strings.HasPrefix(cell, "`"+def+"`") {
				t.Errorf("docs/CONFIGURATION.md gives %s the default %s; the code's is %q", name, cell, def)
			}
		}
	}
	for name := range known {
		if !listed[name] {
			t.Errorf("docs/CONFIGURATION.md has no row for %s, which the service reads", name)
		}
	}
}

// misspeltExample is the misspelling docs/SECURITY.md shows the unknown
// variable warning with.
const misspeltExample = "SECKILL_REDIS_ULR"
