package decision

import (
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

func TestNearMissNames(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		annotation bool
	}{
		{name: "KRUISE_TERMINATE_SIDECARS_WHEN_JOB_EXIT", want: EnvTerminate}, // the plural, as seen in the field
		{name: "kruise_terminate_sidecar_when_job_exit", want: EnvTerminate},  // env names are case-sensitive
		{name: "KRUISE_TERMINATE_SIDECAR_WHEN_JOBS_EXITS", want: EnvTerminate},
		{name: "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAG", want: EnvTerminateWithImage},
		{name: "KRUISE_TERMINATE_SIDECARS_IGNORE_EXITCODE", want: EnvIgnoreExitCode},
		{name: EnvTerminate}, {name: EnvTerminateWithImage}, {name: EnvIgnoreExitCode},
		{name: "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXITXYZ", want: EnvTerminate}, // exactly maxMarkEdits (3) away: still a near miss
		{name: "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_XYZ"},                    // 4 away: not
		{name: "PATH"}, {name: "HTTP_PROXY"}, {name: "KRUISE_TERMINATE"}, {name: "TERMINATE_SIDECAR_WHEN_JOB_EXIT"},
		{name: "sidecar-terminator.io/sidecar", want: AnnotationSidecars, annotation: true},
		{name: "sidecar-terminater.io/sidecars", want: AnnotationSidecars, annotation: true},
		{name: "sidecar-terminator.io/quick-exit-imgae", want: AnnotationQuickExitImage, annotation: true},
		{name: "Sidecar-Terminator.io/Sidecars", want: AnnotationSidecars, annotation: true},
		{name: AnnotationSidecars, annotation: true}, {name: AnnotationQuickExitImage, annotation: true},
		{name: "sidecar.istio.io/inject", annotation: true}, {name: "kubectl.kubernetes.io/default-container", annotation: true},
	} {
		got := NearMissEnv(tc.name)
		if tc.annotation {
			got = NearMissAnnotation(tc.name)
		}
		if got != tc.want {
			t.Errorf("%q: near miss of %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The marks are far enough apart that a name within maxMarkEdits of one is
// further than that from every other: the mark a Warning names is the only
// candidate.
func TestMarksAreFarApart(t *testing.T) {
	for _, marks := range [][]string{envMarks, annotationMarks} {
		for i, a := range marks {
			for _, b := range marks[i+1:] {
				if d := editDistance(a, b, 100); d <= 2*maxMarkEdits {
					t.Errorf("%s and %s are %d edits apart, not more than %d", a, b, d, 2*maxMarkEdits)
				}
			}
		}
	}
}

// The bounded distance agrees with the plain Levenshtein recurrence wherever
// that is within the bound, and says "over" where it is not.
func TestEditDistanceMatchesTheRecurrence(t *testing.T) {
	var full func(a, b string) int
	memo := map[[2]string]int{}
	full = func(a, b string) int {
		if a == "" || b == "" {
			return len(a) + len(b)
		}
		k := [2]string{a, b}
		if d, ok := memo[k]; ok {
			return d
		}
		cost := 1
		if a[len(a)-1] == b[len(b)-1] {
			cost = 0
		}
		d := min(full(a[:len(a)-1], b)+1, full(a, b[:len(b)-1])+1, full(a[:len(a)-1], b[:len(b)-1])+cost)
		memo[k] = d
		return d
	}
	rnd := rand.New(rand.NewSource(1))
	word := func() string {
		var b strings.Builder
		for n := rnd.Intn(9); n > 0; n-- {
			b.WriteByte("ab_"[rnd.Intn(3)])
		}
		return b.String()
	}
	for i := 0; i < 3000; i++ {
		a, b := word(), word()
		want := full(a, b)
		for _, max := range []int{0, 1, 2, 3, 8} {
			got := editDistance(a, b, max)
			if want <= max && got != want || want > max && got != max+1 {
				t.Fatalf("editDistance(%q, %q, %d) = %d; the distance is %d", a, b, max, got, want)
			}
		}
	}
}

// A misspelled mark leaves the pod unmarked (NoSidecars: the controller must
// not guess), with a Warning naming the mark it was likely meant to be.
func TestNearMissIsWarnedNotActedOn(t *testing.T) {
	pod := podtest.Pod("p").Node("node-1").
		Annotate("sidecar-terminator.io/sidecar", "proxy").
		Container("main", podtest.Exited(0, podtest.Epoch)).
		Container("proxy", podtest.Env("KRUISE_TERMINATE_SIDECARS_WHEN_JOB_EXIT", "true"), podtest.Running()).Build()
	plan := Decide(Input{Pod: pod, Node: Node{Name: "node-1", Found: true}, CRRAPI: true, Now: podtest.Epoch.Add(time.Second), Policy: DefaultPolicy()})
	if plan.Verdict != VerdictNoSidecars || len(plan.Actions) != 0 {
		t.Fatalf("verdict %s with %d actions, want NoSidecars and none", plan.Verdict, len(plan.Actions))
	}
	var msgs []string
	for _, p := range plan.Problems {
		if p.Reason == ReasonNearMissMark {
			msgs = append(msgs, p.Message)
		}
	}
	if len(msgs) != 2 || !strings.Contains(msgs[0], "did you mean "+EnvTerminate+"?") ||
		!strings.Contains(msgs[1], "did you mean "+AnnotationSidecars+"?") {
		t.Errorf("near-miss warnings: %q", msgs)
	}
}

// explain prints the recheck to the second: the nanoseconds of a requeue
// computed from the clock are noise to a reader.
func TestExplainRoundsTheRecheck(t *testing.T) {
	for d, want := range map[time.Duration]string{
		60195747026 * time.Nanosecond: "Recheck:  in 1m0s\n",
		1499 * time.Millisecond:       "Recheck:  in 1s\n",
		250300 * time.Microsecond:     "Recheck:  in 250ms\n",
	} {
		var b strings.Builder
		if err := (Plan{RequeueAfter: d}).Explain(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), want) {
			t.Errorf("RequeueAfter %v: %q lacks %q", d, b.String(), want)
		}
	}
}
