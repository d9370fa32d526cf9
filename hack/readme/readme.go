// Package readme reads the README as the tests that hold it to the code
// read it: a section by its heading, and the shell commands of its sh
// blocks as a reader copies them.
package readme

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Section returns the text of root/README.md under heading (e.g. "## Install
// on a cluster"), up to the next second-level heading.
func Section(root, heading string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		return "", err
	}
	doc := string(raw)
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		return "", fmt.Errorf("README.md has no %q section", heading)
	}
	rest := doc[i+len(heading)+2:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest, nil
}

var shBlock = regexp.MustCompile("(?s)```sh\n(.*?)```")

// ShellCommands returns the commands of the text's sh blocks, one per entry,
// continuation lines joined and comment lines dropped.
func ShellCommands(text string) []string {
	var out []string
	for _, m := range shBlock.FindAllStringSubmatch(text, -1) {
		joined := strings.ReplaceAll(m[1], "\\\n", " ")
		for _, line := range strings.Split(joined, "\n") {
			line = strings.TrimSpace(line)
			if line != "" && !strings.HasPrefix(line, "#") {
				out = append(out, line)
			}
		}
	}
	return out
}
