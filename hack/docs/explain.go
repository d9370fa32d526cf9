package docs

import (
	"errors"
	"regexp"
	"strings"
)

// ExplainGolden is the output of a real `explain` run on the local cluster
// (e2e/realnode's TestExplainMatchesTheDocsExample, `make explain-golden`),
// normalised; docs/observability.md shows it.
const ExplainGolden = "docs/examples/explain.txt"

// ExplainCommand is the line above the example in docs/observability.md.
const ExplainCommand = "$ sidecar-terminator explain -n NAMESPACE POD"

var rfc3339RE = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})`)

// NormaliseExplain replaces in explain's output what differs between two
// runs of the same Job: the pod's generated name (job-xxxxx), its UID (the
// first 8 hex digits of which name its CRRs) and timestamps. Nothing else
// is touched, so a change in what explain says shows as a difference.
func NormaliseExplain(out, job, pod, uid string) string {
	out = strings.ReplaceAll(out, pod, job+"-xxxxx")
	if uid != "" {
		out = strings.ReplaceAll(out, uid, "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx")
		short := strings.ReplaceAll(uid, "-", "")
		if len(short) > 8 {
			short = short[:8]
		}
		out = strings.ReplaceAll(out, short, "xxxxxxxx")
	}
	return rfc3339RE.ReplaceAllString(out, "YYYY-MM-DDTHH:MM:SSZ")
}

// ExplainExample returns the example output docs/observability.md shows:
// the lines of the console block after ExplainCommand.
func ExplainExample(doc string) (string, error) {
	i := strings.Index(doc, "```console\n"+ExplainCommand+"\n")
	if i < 0 {
		return "", errors.New("no ```console block starting with " + ExplainCommand)
	}
	rest := doc[i+len("```console\n"+ExplainCommand+"\n"):]
	j := strings.Index(rest, "```")
	if j < 0 {
		return "", errors.New("the explain example's block is not closed")
	}
	return rest[:j], nil
}

// WithExplainExample returns doc with its explain example replaced by
// example.
func WithExplainExample(doc, example string) (string, error) {
	old, err := ExplainExample(doc)
	if err != nil {
		return "", err
	}
	head := "```console\n" + ExplainCommand + "\n"
	return strings.Replace(doc, head+old, head+example, 1), nil
}
