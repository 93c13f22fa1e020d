package arch_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsNameOnlyTestsThatExist: every promise in the documents points at
// the test that proves it (docs/GUARANTEES.md, SECURITY.md, ...); a test
// renamed or removed must not leave a claim pointing at nothing.
func TestDocsNameOnlyTestsThatExist(t *testing.T) {
	root := filepath.Join("..", "..")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(root, "README.md"), filepath.Join(root, "deploy", "README.md"))

	defined := map[string]bool{}
	funcRe := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)[A-Z0-9]\w*)\(`)
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range funcRe.FindAllSubmatch(b, -1) {
			defined[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// A name in backticks, perhaps with a subtest path after it.
	refRe := regexp.MustCompile("`((?:Test|Benchmark|Fuzz)[A-Z0-9]\\w*)(?:/[^`]*)?`")
	named := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range refRe.FindAllSubmatch(b, -1) {
			named++
			if name := string(m[1]); !defined[name] {
				rel, _ := filepath.Rel(root, doc)
				t.Errorf("%s names %s, which no _test.go file defines", rel, name)
			}
		}
	}
	t.Logf("the documents name %d tests", named)
	if named < 50 {
		t.Fatalf("the documents name %d tests: the scan no longer finds them", named)
	}
}
