package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
)

// root is the repository's root; the tests read its files from there.
func root(t *testing.T) string {
	t.Helper()
	r, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// userDocs are the pages a user reads: the README, the root's policy files
// and docs/*.md. measurements.md is among them, though it alone may carry
// dates.
func userDocs(t *testing.T, r string) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(r, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 5 {
		t.Fatalf("docs/*.md: found only %v", pages)
	}
	return append([]string{filepath.Join(r, "README.md"), filepath.Join(r, "SECURITY.md"), filepath.Join(r, "CHANGELOG.md")}, pages...)
}

func rel(r, path string) string {
	if p, err := filepath.Rel(r, path); err == nil {
		return p
	}
	return path
}

// Every relative link of the user docs and INSTALL.md leads to a file that
// exists, and to a heading of it where the link names one.
func TestRelativeLinksResolve(t *testing.T) {
	r := root(t)
	checked := 0
	for _, page := range docPages(t, r) {
		text := read(t, page)
		for _, l := range Links(text) {
			if strings.Contains(l.Target, "://") || strings.HasPrefix(l.Target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(l.Target, "#")
			target := page
			if path != "" {
				target = filepath.Join(filepath.Dir(page), path)
			}
			checked++
			st, err := os.Stat(target)
			if err != nil {
				t.Errorf("%s:%d: link %q: no such file %s", rel(r, page), l.Line, l.Target, rel(r, target))
				continue
			}
			if anchor == "" {
				continue
			}
			if st.IsDir() || !strings.HasSuffix(target, ".md") {
				t.Errorf("%s:%d: link %q: an anchor on a file that is not Markdown", rel(r, page), l.Line, l.Target)
				continue
			}
			if !Anchors(read(t, target))[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", rel(r, page), l.Line, l.Target, rel(r, target), anchor)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked only %d relative links: the pages changed shape or Links broke", checked)
	}
}

var (
	dateRE   = regexp.MustCompile(`20[0-9]{2}-[01][0-9]-[0-3][0-9]`)
	commitRE = regexp.MustCompile("(?i)\\bat `[0-9a-f]{7,40}`")
)

// The README is at most 250 lines, and no user doc but measurements.md
// carries a date or a commit: runs, with their dates and commits, live in
// docs/measurements.md.
func TestUserDocsCarryNoRunLog(t *testing.T) {
	r := root(t)
	readme := read(t, filepath.Join(r, "README.md"))
	if n := strings.Count(readme, "\n"); n > 250 {
		t.Errorf("README.md has %d lines; at most 250 (move detail into docs/)", n)
	}
	for _, page := range userDocs(t, r) {
		if filepath.Base(page) == "measurements.md" {
			continue
		}
		for i, line := range strings.Split(read(t, page), "\n") {
			if m := dateRE.FindString(line); m != "" {
				t.Errorf("%s:%d: a date (%s) in a user doc; dated runs belong in docs/measurements.md", rel(r, page), i+1, m)
			}
			if m := commitRE.FindString(line); m != "" {
				t.Errorf("%s:%d: a commit (%s) in a user doc; runs at a commit belong in docs/measurements.md", rel(r, page), i+1, m)
			}
		}
	}
}

var changelogHeadingRE = regexp.MustCompile(`^## \[(Unreleased|(\d+)\.(\d+)\.(\d+))\]( - (\d{4}-\d{2}-\d{2}))?$`)

// CHANGELOG.md keeps Keep a Changelog's shape, so a release can move
// Unreleased under its version: Unreleased first, then versions, each with
// its date, newest first.
func TestChangelogShape(t *testing.T) {
	r := root(t)
	var headings []string
	for _, line := range strings.Split(read(t, filepath.Join(r, "CHANGELOG.md")), "\n") {
		if strings.HasPrefix(line, "## ") {
			headings = append(headings, line)
		}
	}
	if len(headings) == 0 || headings[0] != "## [Unreleased]" {
		t.Fatalf("CHANGELOG.md's first section must be \"## [Unreleased]\", got %q", headings)
	}
	var prev []int
	for _, h := range headings[1:] {
		m := changelogHeadingRE.FindStringSubmatch(h)
		if m == nil || m[1] == "Unreleased" || m[6] == "" {
			t.Errorf("CHANGELOG.md: %q is not \"## [X.Y.Z] - YYYY-MM-DD\"", h)
			continue
		}
		v := []int{atoi(m[2]), atoi(m[3]), atoi(m[4])}
		if prev != nil && !less(v, prev) {
			t.Errorf("CHANGELOG.md: %q is not older than the version above it", h)
		}
		prev = v
	}
}

func atoi(s string) int {
	n := 0
	for _, r := range s {
		n = n*10 + int(r-'0')
	}
	return n
}

func less(a, b []int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}
