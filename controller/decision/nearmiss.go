package decision

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ReasonNearMissMark: an env name or annotation key is a few edits away from
// a mark, so it was very likely meant as one. Without the Warning the pod
// only hangs: an unmarked sidecar is a main container to the controller.
const ReasonNearMissMark = "NearMissMark"

// maxMarkEdits is how far (in single-character insertions, deletions and
// substitutions, after folding case) a name may be from a mark and still be
// taken for a misspelling of it. The marks differ from each other by more
// than twice this (the closest pair, the two terminate env names, by 11), so a
// name is near at most one of them.
const maxMarkEdits = 3

var (
	envMarks        = []string{EnvTerminate, EnvTerminateWithImage, EnvIgnoreExitCode}
	annotationMarks = []string{AnnotationSidecars, AnnotationQuickExitImage}
)

// NearMissEnv returns the env mark that name is a misspelling of, or "" when
// name is a mark itself or near none.
func NearMissEnv(name string) string { return nearest(name, envMarks) }

// NearMissAnnotation is NearMissEnv for pod annotation keys.
func NearMissAnnotation(key string) string { return nearest(key, annotationMarks) }

func nearest(s string, marks []string) string {
	for _, m := range marks {
		if s == m {
			return ""
		}
	}
	for _, m := range marks {
		if editDistance(strings.ToUpper(s), strings.ToUpper(m), maxMarkEdits) <= maxMarkEdits {
			return m
		}
	}
	return ""
}

// nearMisses warns about every env name of a regular container and every
// pod annotation key that is a near miss of a mark.
func nearMisses(pod *corev1.Pod) []Problem {
	var problems []Problem
	for _, c := range pod.Spec.Containers {
		for _, env := range c.Env {
			if mark := NearMissEnv(env.Name); mark != "" {
				problems = append(problems, Problem{Reason: ReasonNearMissMark, Message: fmt.Sprintf(
					"container %q: env %s is not a sidecar mark; did you mean %s? As written it marks nothing, and an unmarked container is a main container the pod waits for",
					c.Name, env.Name, mark)})
			}
		}
	}
	keys := make([]string, 0, len(pod.Annotations))
	for k := range pod.Annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys) // one order, so each Warning is emitted once
	for _, k := range keys {
		if mark := NearMissAnnotation(k); mark != "" {
			problems = append(problems, Problem{Reason: ReasonNearMissMark, Message: fmt.Sprintf(
				"annotation %s is not one of ours; did you mean %s? As written it is ignored", k, mark)})
		}
	}
	return problems
}

// editDistance is the Levenshtein distance of a and b, or max+1 as soon as
// it must exceed max (rows of the table whose minimum is over max end it).
func editDistance(a, b string, max int) int {
	if d := len(a) - len(b); d > max || -d > max {
		return max + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > max {
			return max + 1
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], max+1)
}
