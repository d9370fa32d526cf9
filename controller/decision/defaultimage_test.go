package decision_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// defaultImage is the operator's --default-quick-exit-image in these rows:
// a tag of the allowed repository.
const defaultImage = "ghcr.io/sidecar-terminator/quick-exit:default"

func swapToDefault(index int, container, from string) Action {
	return Action{Kind: ActionSwapImage, Containers: []string{container},
		Swaps: []Swap{{Index: index, Container: container, From: from, To: defaultImage}}}
}

// TestDecideDefaultQuickExitImage: the operator's default quick-exit image is
// swapped in for marked sidecars without an image of their own wherever no
// CRR path exists, and never where one works.
func TestDecideDefaultQuickExitImage(t *testing.T) {
	crrOnly := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR).Build()
	withImage := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, markImage).Build()
	injected := podtest.Pod("p").Annotate(AnnotationSidecars, "istio-proxy").Container("main", exited(0)).Container("istio-proxy").Build()
	notAllowed := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, podtest.Env(EnvTerminateWithImage, "example.com/other:1")).Build()
	neverStarted := podtest.Pod("p").Phase(corev1.PodPending).Container("main", exited(0)).Container("log", markCRR, podtest.Waiting("ErrImagePull", nil)).Build()
	swapped := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, podtest.Image(defaultImage), podtest.Waiting("ImagePullBackOff", nil)).Build()
	grace := PodGrace(swapped) + DefaultPolicy().SwapStartAllowance
	crr1 := CRR{Name: CRRName(crrOnly, 1), Attempt: 1, Containers: []string{"log"}, Phase: "Completed", Created: t0, Completed: exitAt}
	refusedCRR := webhookDown

	cases := map[string]struct {
		pod          *corev1.Pod
		node         Node
		noCRR        bool
		crrs         []CRR
		refusals     []Refusal
		swappedAt    time.Time
		defaultImage string
		allowed      []string
		want         want
	}{
		"no CRR API, no image of its own: swapped to the default": {
			pod: crrOnly, noCRR: true, defaultImage: defaultImage,
			want: want{verdict: VerdictAct, actions: []Action{swapToDefault(1, "log", img("log"))}},
		},
		"no CRR API, no default: no path, a Warning": {
			pod: crrOnly, noCRR: true,
			want: want{verdict: VerdictNoPath, problems: []string{ReasonNoTerminationPath}},
		},
		"CRR API on a normal node: a CRR, the default is not used": {
			pod: crrOnly, defaultImage: defaultImage,
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}},
		},
		"virtual node: swapped to the default": {
			pod: crrOnly, node: virtual, defaultImage: defaultImage,
			want: want{verdict: VerdictAct, actions: []Action{swapToDefault(1, "log", img("log"))}},
		},
		"CRR refused (500): failed kill, swapped to the default at once": {
			pod: crrOnly, refusals: []Refusal{refusedCRR}, defaultImage: defaultImage,
			want: want{verdict: VerdictAct, actions: []Action{swapToDefault(1, "log", img("log"))},
				problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"}},
		},
		"CRR ended with the sidecar still running: failed kill, swapped to the default": {
			pod: crrOnly, crrs: []CRR{crr1}, defaultImage: defaultImage,
			want: want{verdict: VerdictAct, actions: []Action{swapToDefault(1, "log", img("log"))},
				problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"}},
		},
		"sidecar never started (a CRR cannot stop it): swapped to the default": {
			pod: neverStarted, defaultImage: defaultImage,
			want: want{verdict: VerdictAct, actions: []Action{swapToDefault(1, "log", img("log"))}},
		},
		"injected sidecar named by the annotation, no image annotation, no CRR API: the default": {
			pod: injected, noCRR: true, defaultImage: defaultImage,
			want: want{verdict: VerdictAct, actions: []Action{swapToDefault(1, "istio-proxy", img("istio-proxy"))}},
		},
		"the sidecar's own image wins over the default": {
			pod: withImage, noCRR: true, defaultImage: defaultImage,
			want: want{verdict: VerdictAct, actions: []Action{swapOf(1, "log", img("log"))}},
		},
		"an image of its own that is not allowed: no default in its place": {
			pod: notAllowed, noCRR: true, defaultImage: defaultImage,
			want: want{verdict: VerdictNoPath, problems: []string{ReasonQuickExitImageNotAllowed, ReasonNoTerminationPath}},
		},
		"a default not on the allowlist is never used (fails closed)": {
			pod: crrOnly, noCRR: true, defaultImage: "example.com/quick-exit:1",
			want: want{verdict: VerdictNoPath, problems: []string{ReasonNoTerminationPath}},
		},
		"swapped to the default, within its bound: in progress, no second swap": {
			pod: swapped, noCRR: true, defaultImage: defaultImage, swappedAt: now.Add(-time.Second),
			want: want{verdict: VerdictInProgress, requeue: grace - time.Second},
		},
		"swapped to the default, past its bound: a Warning names the waiting reason": {
			pod: swapped, noCRR: true, defaultImage: defaultImage, swappedAt: now.Add(-grace),
			want: want{verdict: VerdictInProgress, problems: []string{ReasonQuickExitNotRunning}, requeue: grace},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			node := tc.node
			if node.Name == "" {
				node = normal
			}
			p := DefaultPolicy()
			p.DefaultQuickExitImage = tc.defaultImage
			if tc.allowed != nil {
				p.AllowedQuickExitImages = tc.allowed
			}
			in := Input{Pod: tc.pod, Node: node, CRRAPI: !tc.noCRR, CRRs: tc.crrs, Refusals: tc.refusals, Now: now, Policy: p}
			if !tc.swappedAt.IsZero() {
				in.SwappedAt = map[string]time.Time{"log": tc.swappedAt}
			}
			plan := Decide(in)
			checkPlan(t, tc.want, plan)
			assertOnlySidecarsTouched(t, plan)
		})
	}
}

func TestExplainNamesTheDefaultImage(t *testing.T) {
	p := DefaultPolicy()
	p.DefaultQuickExitImage = defaultImage
	pod := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR).Build()
	plan := Decide(Input{Pod: pod, Node: normal, Now: now, Policy: p})
	var sb strings.Builder
	if err := plan.Explain(&sb); err != nil {
		t.Fatal(err)
	}
	if out := sb.String(); !strings.Contains(out, "default image "+defaultImage+" where no CRR path") {
		t.Errorf("explain does not name the default image:\n%s", out)
	}
}
