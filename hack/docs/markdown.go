// Package docs reads the project's Markdown the way its tests need: the
// links a page makes, the anchors its headings get on GitHub, the `make`
// commands and chart values it names, and the fenced block that shows an
// example. The tests beside it hold README.md, docs/*.md and
// controller/deploy/INSTALL.md to the code, the Makefile and the chart.
package docs

import (
	"regexp"
	"strings"
	"unicode"
)

// Link is one Markdown link or image: its target as written, and the line.
type Link struct {
	Target string
	Line   int
}

var (
	linkRE  = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	fenceRE = regexp.MustCompile("^\\s*(```|~~~)")
)

// Links returns the links of a page outside fenced code blocks and inline
// code spans.
func Links(text string) []Link {
	var out []Link
	for i, line := range ProseLines(text) {
		if line == "" {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(stripCodeSpans(line), -1) {
			out = append(out, Link{Target: m[1], Line: i + 1})
		}
	}
	return out
}

// ProseLines returns the page's lines with those inside fenced code blocks
// (and the fences) blanked, so line numbers stay those of the file.
func ProseLines(text string) []string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		if fenceRE.MatchString(l) {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return lines
}

var codeSpanRE = regexp.MustCompile("`[^`]*`")

func stripCodeSpans(line string) string { return codeSpanRE.ReplaceAllString(line, "") }

// Anchors returns the anchors GitHub gives the page's headings: lower case,
// punctuation dropped (backticks and dots too), spaces made hyphens, and a
// repeated heading suffixed -1, -2, ...
func Anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range ProseLines(text) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimLeft(line, "#")
		if title == line || !strings.HasPrefix(title, " ") {
			continue
		}
		a := Anchor(title)
		if n := seen[a]; n > 0 {
			out[a+"-"+itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// Anchor is GitHub's anchor for one heading's text.
func Anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(title)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

// Commands returns the shell commands a page shows: each line of its sh,
// bash, console and unlabelled fenced blocks (continuation lines joined, a
// leading "$ " dropped, comments cut) and each inline code span. A reader
// copies either.
func Commands(text string) []string {
	var out []string
	lines := strings.Split(text, "\n")
	in, shell := false, false
	var cur string
	for _, l := range lines {
		if m := fenceRE.FindString(l); m != "" {
			if in {
				in = false
				continue
			}
			lang := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), strings.TrimSpace(m)))
			in, shell = true, lang == "" || lang == "sh" || lang == "bash" || lang == "console" || lang == "shell"
			continue
		}
		if in {
			if !shell {
				continue
			}
			if strings.HasSuffix(l, "\\") {
				cur += strings.TrimSuffix(l, "\\") + " "
				continue
			}
			cmd := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(cur+l), "$ "))
			cur = ""
			if cmd != "" && !strings.HasPrefix(cmd, "#") {
				out = append(out, cmd)
			}
			continue
		}
	}
	// Inline code spans may wrap across lines in a paragraph.
	joined := strings.Join(ProseLines(text), " ")
	for _, m := range codeSpanRE.FindAllString(joined, -1) {
		out = append(out, strings.Trim(m, "`"))
	}
	return out
}
