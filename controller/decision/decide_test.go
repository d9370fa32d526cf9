package decision_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

var (
	t0      = podtest.Epoch
	exitAt  = t0.Add(10 * time.Second)
	now     = t0.Add(11 * time.Second)
	normal  = Node{Name: "node-1", Found: true}
	virtual = Node{Name: "node-1", Found: true, Virtual: true}

	quickExit = "ghcr.io/sidecar-terminator/quick-exit:v1"
	markCRR   = podtest.Env(EnvTerminate, "true")
	markImage = podtest.Env(EnvTerminateWithImage, quickExit)
	ignoreRC  = podtest.Env(EnvIgnoreExitCode, "true")
)

func exited(code int32) podtest.Option { return podtest.Exited(code, exitAt) }

// want describes a plan by what matters: verdict, actions and warning reasons.
type want struct {
	verdict  Verdict
	actions  []Action
	problems []string // reasons, in order
	failed   []string
	requeue  time.Duration
}

// checkPlan compares what a table row wants with the plan: verdict,
// actions, the problems' reasons in order, failed kills and requeue.
func checkPlan(t *testing.T, w want, plan Plan) {
	t.Helper()
	got := want{verdict: plan.Verdict, actions: plan.Actions, failed: plan.FailedKills, requeue: plan.RequeueAfter}
	for _, p := range plan.Problems {
		got.problems = append(got.problems, p.Reason)
	}
	if diff := cmp.Diff(w, got, cmp.AllowUnexported(want{})); diff != "" {
		t.Errorf("plan differs (-want +got):\n%s\nreason: %s\nproblems: %+v", diff, plan.Reason, plan.Problems)
	}
}

func crrFor(pod string, attempt int, containers ...string) Action {
	return Action{Kind: ActionCreateCRR, Containers: containers, Attempt: attempt,
		CRRName: CRRName(podtest.Pod(pod).Build(), attempt), ReadPodFirst: true}
}

func swapOf(index int, container, from string) Action {
	return Action{Kind: ActionSwapImage, Containers: []string{container},
		Swaps: []Swap{{Index: index, Container: container, From: from, To: quickExit}}}
}

func img(name string) string { return "example.com/" + name + ":1" }

func TestDecide(t *testing.T) {
	cases := map[string]struct {
		// setup
		pod    *corev1.Pod
		node   Node
		crrs   []CRR
		noCRR  bool // the CRR API is not installed
		at     time.Time
		policy *Policy
		// expectations
		want want
	}{
		// Which pods.
		"restartPolicy Always is ignored": {
			pod:  podtest.Pod("p").RestartPolicy(corev1.RestartPolicyAlways).Container("main", exited(0)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictIgnored},
		},
		"pod pending on its init containers is ignored": {
			pod: podtest.Pod("p").Phase(corev1.PodPending).Init("setup", podtest.Running()).
				Container("main", podtest.Waiting("PodInitializing", nil)).Container("log", markCRR, podtest.Waiting("PodInitializing", nil)).Build(),
			want: want{verdict: VerdictIgnored},
		},
		"init container still running is ignored even when phase says Running": {
			pod: podtest.Pod("p").Init("setup", podtest.Running()).
				Container("main", podtest.Waiting("PodInitializing", nil)).Container("log", markCRR, podtest.Waiting("PodInitializing", nil)).Build(),
			want: want{verdict: VerdictMainsActive},
		},
		"pod Succeeded is ignored": {
			pod:  podtest.Pod("p").Phase(corev1.PodSucceeded).Container("main", exited(0)).Container("log", markCRR, exited(0)).Build(),
			want: want{verdict: VerdictIgnored},
		},
		"pod Failed is ignored": {
			pod:  podtest.Pod("p").Phase(corev1.PodFailed).Container("main", exited(1)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictIgnored},
		},
		"pod being deleted is ignored": {
			pod:  podtest.Pod("p").Deleting().Container("main", exited(0)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictIgnored},
		},
		"container statuses missing is ignored": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, podtest.NoStatus()).Build(),
			want: want{verdict: VerdictIgnored},
		},
		"no sidecar marked: nothing to do": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log").Build(),
			want: want{verdict: VerdictNoSidecars},
		},

		// When: the main containers.
		"main running: wait": {
			pod:  podtest.Pod("p").Container("main").Container("log", markCRR).Build(),
			want: want{verdict: VerdictMainsActive},
		},
		"main waiting: wait": {
			pod:  podtest.Pod("p").Container("main", podtest.Waiting("ContainerCreating", nil)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictMainsActive},
		},
		"Never, main exited 0: CRR": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}},
		},
		"Never, main exited non-zero: CRR (the kubelet will not restart it)": {
			pod:  podtest.Pod("p").Container("main", exited(2)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}},
		},
		"OnFailure, main exited 0: CRR": {
			pod:  podtest.Pod("p").OnFailure().Container("main", exited(0)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}},
		},
		"OnFailure, main exited non-zero: wait, the kubelet restarts it": {
			pod:  podtest.Pod("p").OnFailure().Container("main", exited(1)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictMainsActive},
		},
		"OnFailure, main restarted and running again: wait": {
			pod:  podtest.Pod("p").OnFailure().Container("main", podtest.Restarts(1)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictMainsActive},
		},
		"OnFailure, main in back-off after a failure: wait": {
			pod:  podtest.Pod("p").OnFailure().Container("main", podtest.Waiting("CrashLoopBackOff", podtest.Int32(1)), podtest.Restarts(1)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictMainsActive},
		},
		"OnFailure, main exited 0 after an earlier failure: CRR": {
			pod:  podtest.Pod("p").OnFailure().Container("main", exited(0), podtest.Restarts(2)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}},
		},
		"two mains, one done: wait": {
			pod:  podtest.Pod("p").Container("a", exited(0)).Container("b").Container("log", markCRR).Build(),
			want: want{verdict: VerdictMainsActive},
		},
		"two mains, both done: CRR": {
			pod:  podtest.Pod("p").Container("a", exited(0)).Container("b", exited(1)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}},
		},
		"no main container: Warning, no action": {
			pod:  podtest.Pod("p").Container("log", markCRR).Container("proxy", markImage).Build(),
			want: want{verdict: VerdictNoMain, problems: []string{ReasonNoMainContainer}},
		},

		// Sidecars: marks.
		"two sidecars, one already exited: CRR for the other": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, exited(0)).Container("proxy", markCRR).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "proxy")}},
		},
		"all sidecars exited: done": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, exited(0)).Build(),
			want: want{verdict: VerdictDone},
		},
		"env TRUE in capitals marks a sidecar": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", podtest.Env(EnvTerminate, "TRUE")).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}},
		},
		"env false: not a sidecar, no Warning": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", podtest.Env(EnvTerminate, "false")).Build(),
			want: want{verdict: VerdictNoSidecars},
		},
		"env empty: not a sidecar, Warning": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", podtest.Env(EnvTerminate, "")).Build(),
			want: want{verdict: VerdictNoSidecars, problems: []string{ReasonInvalidSidecarEnv}},
		},
		"env yes: not a sidecar, Warning": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", podtest.Env(EnvTerminate, "yes")).Build(),
			want: want{verdict: VerdictNoSidecars, problems: []string{ReasonInvalidSidecarEnv}},
		},
		"env from a valueFrom: not a sidecar, Warning": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", podtest.EnvFrom(EnvTerminate, "metadata.name")).Build(),
			want: want{verdict: VerdictNoSidecars, problems: []string{ReasonInvalidSidecarEnv}},
		},
		"bad-valued container is a main: its sidecar waits for it": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("odd", podtest.Env(EnvTerminate, "yes")).Container("log", markCRR).Build(),
			want: want{verdict: VerdictMainsActive, problems: []string{ReasonInvalidSidecarEnv}},
		},

		// How, by node kind.
		"image-only on a normal node: image swap": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markImage).Build(),
			want: want{verdict: VerdictAct, actions: []Action{swapOf(1, "log", img("log"))}},
		},
		"a Job pod's generated name is not read live before its CRR": {
			pod: podtest.Pod("p").GeneratedName("report-", "x7k2p").OwnedByJob("report").Container("main", exited(0)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictAct, actions: []Action{{Kind: ActionCreateCRR, Containers: []string{"log"}, Attempt: 1,
				CRRName: CRRName(podtest.Pod("p").GeneratedName("report-", "x7k2p").Build(), 1), ReadPodFirst: false}}},
		},
		"a generated name with no Job owning the pod is read live before its CRR": {
			pod: podtest.Pod("p").GeneratedName("report-", "x7k2p").Container("main", exited(0)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictAct, actions: []Action{{Kind: ActionCreateCRR, Containers: []string{"log"}, Attempt: 1,
				CRRName: CRRName(podtest.Pod("p").GeneratedName("report-", "x7k2p").Build(), 1), ReadPodFirst: true}}},
		},
		"a chosen name that only looks generated is read live before its CRR": {
			pod:  podtest.Pod("report-x7k2p").Container("main", exited(0)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("report-x7k2p", 1, "log")}},
		},
		"both envs on a normal node: CRR": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, markImage).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}},
		},
		"both envs on a virtual node: image swap": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, markImage).Build(),
			node: virtual,
			want: want{verdict: VerdictAct, actions: []Action{swapOf(1, "log", img("log"))}},
		},
		"image-only on a virtual node: image swap": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markImage).Build(),
			node: virtual,
			want: want{verdict: VerdictAct, actions: []Action{swapOf(1, "log", img("log"))}},
		},
		"plain env only on a virtual node: Warning, no action": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR).Build(),
			node: virtual,
			want: want{verdict: VerdictNoPath, problems: []string{ReasonNoTerminationPath}},
		},
		"virtual node, main still running: nothing, not even the Warning": {
			pod:  podtest.Pod("p").Container("main").Container("log", markCRR).Build(),
			node: virtual,
			want: want{verdict: VerdictMainsActive},
		},
		"CRR API not installed, plain env: Warning, no action": {
			pod:   podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR).Build(),
			noCRR: true,
			want:  want{verdict: VerdictNoPath, problems: []string{ReasonNoTerminationPath}},
		},
		"CRR API not installed, both envs: image swap": {
			pod:   podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, markImage).Build(),
			noCRR: true,
			want:  want{verdict: VerdictAct, actions: []Action{swapOf(1, "log", img("log"))}},
		},
		"mixed marks in one pod: one CRR and one swap": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR).Container("proxy", markImage).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log"), swapOf(2, "proxy", img("proxy"))}},
		},
		"unknown node: Warning, no action, look again later": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR).Build(),
			node: Node{Name: "node-1"},
			want: want{verdict: VerdictNoPath, problems: []string{ReasonNodeNotFound}, requeue: 30 * time.Second},
		},

		// Images.
		"invalid image reference: Warning, sidecar with no path": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", podtest.Env(EnvTerminateWithImage, "Not A/Valid Image")).Build(),
			want: want{verdict: VerdictNoPath, problems: []string{ReasonInvalidQuickExitImage, ReasonNoTerminationPath}},
		},
		"invalid image with the plain env on a normal node: CRR still works": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, podtest.Env(EnvTerminateWithImage, "UPPER/case:1")).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}, problems: []string{ReasonInvalidQuickExitImage}},
		},
		"image digest of the allowed repository is valid": {
			pod: podtest.Pod("p").Container("main", exited(0)).Container("log",
				podtest.Env(EnvTerminateWithImage, DefaultQuickExitRepository+"@sha256:"+strings.Repeat("a", 64))).Build(),
			want: want{verdict: VerdictAct, actions: []Action{{Kind: ActionSwapImage, Containers: []string{"log"},
				Swaps: []Swap{{Index: 1, Container: "log", From: img("log"), To: DefaultQuickExitRepository + "@sha256:" + strings.Repeat("a", 64)}}}}},
		},
		"default allowlist: any other image gets a Warning, no swap": {
			pod: podtest.Pod("p").Container("main", exited(0)).Container("log",
				podtest.Env(EnvTerminateWithImage, "attacker.example.com/payload:latest")).Build(),
			want: want{verdict: VerdictNoPath, problems: []string{ReasonQuickExitImageNotAllowed, ReasonNoTerminationPath}},
		},
		"default allowlist: a look-alike repository is not the project's": {
			pod: podtest.Pod("p").Container("main", exited(0)).Container("log",
				podtest.Env(EnvTerminateWithImage, DefaultQuickExitRepository+"-evil:v1")).Build(),
			want: want{verdict: VerdictNoPath, problems: []string{ReasonQuickExitImageNotAllowed, ReasonNoTerminationPath}},
		},
		"empty allowlist allows nothing": {
			pod:    podtest.Pod("p").Container("main", exited(0)).Container("log", markImage).Build(),
			policy: &Policy{CRRDeadline: time.Minute, MaxCRRAttempts: 3},
			want:   want{verdict: VerdictNoPath, problems: []string{ReasonQuickExitImageNotAllowed, ReasonNoTerminationPath}},
		},
		"allowlist '*' allows any valid image, an explicit choice": {
			pod: podtest.Pod("p").Container("main", exited(0)).Container("log",
				podtest.Env(EnvTerminateWithImage, "registry.example/any:1")).Build(),
			policy: &Policy{AllowedQuickExitImages: []string{AllowAnyImage}, CRRDeadline: time.Minute, MaxCRRAttempts: 3},
			want: want{verdict: VerdictAct, actions: []Action{{Kind: ActionSwapImage, Containers: []string{"log"},
				Swaps: []Swap{{Index: 1, Container: "log", From: img("log"), To: "registry.example/any:1"}}}}},
		},
		"image not in the allowlist: Warning, no swap": {
			pod:    podtest.Pod("p").Container("main", exited(0)).Container("log", markImage).Build(),
			policy: &Policy{AllowedQuickExitImages: []string{"registry.example/quick-exit"}, CRRDeadline: time.Minute, MaxCRRAttempts: 3},
			want:   want{verdict: VerdictNoPath, problems: []string{ReasonQuickExitImageNotAllowed, ReasonNoTerminationPath}},
		},
		"image repository in the allowlist: swap": {
			pod:    podtest.Pod("p").Container("main", exited(0)).Container("log", markImage).Build(),
			policy: &Policy{AllowedQuickExitImages: []string{"ghcr.io/sidecar-terminator/quick-exit"}, CRRDeadline: time.Minute, MaxCRRAttempts: 3},
			want:   want{verdict: VerdictAct, actions: []Action{swapOf(1, "log", img("log"))}},
		},
		"image already swapped: in progress, no second patch, looked at again once grace and start allowance pass": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markImage, podtest.Image(quickExit)).Build(),
			node: virtual,
			// Counted from the mains' exit, the earliest the swap can have been.
			want: want{verdict: VerdictInProgress, requeue: 30*time.Second + DefaultPolicy().SwapStartAllowance - now.Sub(exitAt)},
		},

		// Injected sidecars, by annotation.
		"annotated sidecar on a normal node: CRR": {
			pod: podtest.Pod("p").Annotate(AnnotationSidecars, "istio-proxy").
				Container("main", exited(0)).Container("istio-proxy").Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "istio-proxy")}},
		},
		"annotated sidecar on a virtual node takes the pod's quick-exit image": {
			pod: podtest.Pod("p").Annotate(AnnotationSidecars, "istio-proxy, linkerd-proxy").Annotate(AnnotationQuickExitImage, quickExit).
				Container("main", exited(0)).Container("istio-proxy").Build(),
			node: virtual,
			want: want{verdict: VerdictAct, actions: []Action{swapOf(1, "istio-proxy", img("istio-proxy"))}, problems: []string{ReasonUnknownSidecarName}},
		},
		"annotation naming every container: no main, Warning": {
			pod: podtest.Pod("p").Annotate(AnnotationSidecars, "main,log").
				Container("main", exited(0)).Container("log").Build(),
			want: want{verdict: VerdictNoMain, problems: []string{ReasonNoMainContainer}},
		},
		"annotation naming an init container: Warning, ignored": {
			pod: podtest.Pod("p").Annotate(AnnotationSidecars, "setup").Init("setup").
				Container("main", exited(0)).Container("log").Build(),
			want: want{verdict: VerdictNoSidecars, problems: []string{ReasonUnknownSidecarName}},
		},

		// Native sidecars and init containers are never touched.
		"native sidecar is left to the kubelet": {
			pod: podtest.Pod("p").NativeSidecar("proxy", markCRR).
				Container("main", exited(0)).Build(),
			want: want{verdict: VerdictNoSidecars},
		},
		"native sidecar beside a marked regular sidecar: only the regular one": {
			pod: podtest.Pod("p").NativeSidecar("proxy", markCRR).Init("setup").
				Container("main", exited(0)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}},
		},

		// Never-started sidecars.
		"never-started sidecar with an image: swap, pod Pending": {
			pod:  podtest.Pod("p").Phase(corev1.PodPending).Container("main", exited(0)).Container("log", markCRR, markImage, podtest.NeverStarted()).Build(),
			want: want{verdict: VerdictAct, actions: []Action{swapOf(1, "log", img("log"))}},
		},
		"never-started sidecar without an image: Warning, look again": {
			pod:  podtest.Pod("p").Phase(corev1.PodPending).Container("main", exited(0)).Container("log", markCRR, podtest.NeverStarted()).Build(),
			want: want{verdict: VerdictNoPath, problems: []string{ReasonNoTerminationPath}, requeue: 10 * time.Second},
		},

		// Follow-through.
		"CRR in flight: no second CRR": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR).Build(),
			crrs: []CRR{{Name: "c1", Attempt: 1, Containers: []string{"log"}, Phase: "Recreating", Created: exitAt}},
			want: want{verdict: VerdictInProgress, requeue: time.Minute},
		},
		"CRR Recreating and the sidecar terminated (Never): done": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, exited(0)).Build(),
			crrs: []CRR{{Name: "c1", Attempt: 1, Containers: []string{"log"}, Phase: "Recreating", Created: exitAt}},
			want: want{verdict: VerdictDone},
		},
		"CRR completed but the sidecar runs: Warning, retry after backoff": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR).Build(),
			crrs: []CRR{{Name: "c1", Attempt: 1, Containers: []string{"log"}, Phase: "Completed", Created: exitAt, Completed: now.Add(-time.Second)}},
			want: want{verdict: VerdictInProgress, actions: []Action{recorded(0, 1, exitAt)}, problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"}, requeue: 4 * time.Second},
		},
		"CRR failed, backoff passed: second CRR": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR).Build(),
			crrs: []CRR{{Name: "c1", Attempt: 1, Containers: []string{"log"}, Phase: "Completed", Created: exitAt, Completed: exitAt}},
			at:   exitAt.Add(6 * time.Second),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 2, "log"), recorded(0, 2, time.Time{})}, problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"}},
		},
		"CRR past its deadline with the sidecar running: failed kill, swap when an image is known": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, markImage).Build(),
			crrs: []CRR{{Name: "c1", Attempt: 1, Containers: []string{"log"}, Phase: "Recreating", Created: exitAt}},
			at:   exitAt.Add(2 * time.Minute),
			want: want{verdict: VerdictAct, actions: []Action{swapOf(1, "log", img("log"))}, problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"}},
		},
		"sidecar came back after the CRR (OnFailure restart): swap": {
			pod:  podtest.Pod("p").OnFailure().Container("main", exited(0)).Container("log", markCRR, markImage, podtest.Restarts(1)).Build(),
			crrs: []CRR{{Name: "c1", Attempt: 1, Containers: []string{"log"}, Phase: "Completed", Created: exitAt, Completed: exitAt}},
			want: want{verdict: VerdictAct, actions: []Action{swapOf(1, "log", img("log"))}, problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"}},
		},
		"sidecar came back while the CRR is still recreating: counted failed, one CRR at a time": {
			pod:  podtest.Pod("p").OnFailure().Container("main", exited(0)).Container("log", markCRR, podtest.Restarts(1)).Build(),
			crrs: []CRR{{Name: "c1", Attempt: 1, Containers: []string{"log"}, RestartCounts: map[string]int32{"log": 0}, Phase: "Recreating", Created: exitAt}},
			want: want{verdict: VerdictInProgress, problems: []string{ReasonSidecarKillFailed}, failed: []string{"log"}, requeue: time.Minute},
		},
		"sidecar back in back-off after the CRR, no image: Warning": {
			pod:  podtest.Pod("p").OnFailure().Container("main", exited(0)).Container("log", markCRR, podtest.Waiting("CrashLoopBackOff", podtest.Int32(143)), podtest.Restarts(1)).Build(),
			crrs: []CRR{{Name: "c1", Attempt: 1, Containers: []string{"log"}, Phase: "Completed", Created: exitAt, Completed: exitAt}},
			want: want{verdict: VerdictNoPath, problems: []string{ReasonSidecarKillFailed, ReasonNoTerminationPath}, failed: []string{"log"}, requeue: 10 * time.Second},
		},
		"the retry's attempt recorded on the pod while that CRR is in flight: wait for it, no third CRR": {
			pod: podtest.Pod("p").Annotate(AnnotationCRRAttempts, AttemptsMark(0, 2)).Container("main", exited(0)).Container("log", markCRR).Build(),
			crrs: []CRR{
				{Name: "c1", Attempt: 1, Containers: []string{"log"}, Phase: "Completed", Created: t0, Completed: t0},
				{Name: "c2", Attempt: 2, Containers: []string{"log"}, Phase: "Recreating", Created: exitAt},
			},
			want: want{verdict: VerdictInProgress, requeue: time.Minute},
		},
		"attempts used up: give up with a Warning": {
			pod: podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR).Build(),
			crrs: []CRR{
				{Name: "c1", Attempt: 1, Containers: []string{"log"}, Phase: "Completed", Created: t0, Completed: t0},
				{Name: "c2", Attempt: 2, Containers: []string{"log"}, Phase: "Completed", Created: t0, Completed: t0},
				{Name: "c3", Attempt: 3, Containers: []string{"log"}, Phase: "Completed", Created: t0, Completed: t0},
			},
			at:   t0.Add(time.Hour),
			want: want{verdict: VerdictNoPath, actions: []Action{recorded(0, 3, t0)}, problems: []string{ReasonSidecarKillFailed, ReasonSidecarKillGaveUp, ReasonNoTerminationPath}, failed: []string{"log"}},
		},

		// Ignore exit code.
		"ignore-exit-code waits for the other sidecars first": {
			pod: podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR).
				Container("proxy", markCRR, ignoreRC).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}},
		},
		"ignore-exit-code: settle the phase Succeeded, nothing else (the kubelet stops the sidecar)": {
			pod: podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, exited(143)).
				Container("proxy", markCRR, ignoreRC).Build(),
			want: want{verdict: VerdictAct, actions: []Action{
				{Kind: ActionSettlePhase, Containers: []string{"proxy"}, Phase: corev1.PodSucceeded}}},
		},
		"ignore-exit-code with a failed main: settle the phase Failed": {
			pod:  podtest.Pod("p").Container("main", exited(3)).Container("proxy", markImage, ignoreRC).Build(),
			node: virtual,
			want: want{verdict: VerdictAct, actions: []Action{
				{Kind: ActionSettlePhase, Containers: []string{"proxy"}, Phase: corev1.PodFailed}}},
		},
		"ignore-exit-code, kubelet reverted the phase to Running: settle again": {
			pod: podtest.Pod("p").ConditionAt(ConditionSidecarTerminated, corev1.ConditionTrue, exitAt).
				Container("main", exited(0)).Container("proxy", markCRR, ignoreRC).Build(),
			want: want{verdict: VerdictAct, actions: []Action{
				{Kind: ActionSettlePhase, Containers: []string{"proxy"}, Phase: corev1.PodSucceeded}}},
		},
		"ignore-exit-code, settled a moment ago: wait for the kubelet's grace period": {
			pod: podtest.Pod("p").Phase(corev1.PodSucceeded).ConditionAt(ConditionSidecarTerminated, corev1.ConditionTrue, exitAt).
				Container("main", exited(0)).Container("proxy", markCRR, ignoreRC).Build(),
			want: want{verdict: VerdictInProgress, requeue: 39 * time.Second},
		},
		"ignore-exit-code, settled and the kubelet did not stop it: stop it ourselves": {
			pod: podtest.Pod("p").Phase(corev1.PodSucceeded).ConditionAt(ConditionSidecarTerminated, corev1.ConditionTrue, exitAt).
				Container("main", exited(0)).Container("proxy", markCRR, ignoreRC).Build(),
			at:   exitAt.Add(41 * time.Second),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "proxy")}},
		},
		"ignore-exit-code, settled and stopped: done": {
			pod: podtest.Pod("p").Phase(corev1.PodSucceeded).Condition(ConditionSidecarTerminated, corev1.ConditionTrue).
				Container("main", exited(0)).Container("proxy", markCRR, ignoreRC, exited(137)).Build(),
			want: want{verdict: VerdictDone},
		},
		"ignore-exit-code on a main container means nothing": {
			pod:  podtest.Pod("p").Container("main", ignoreRC).Container("log", markCRR).Build(),
			want: want{verdict: VerdictMainsActive},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := Input{Pod: tc.pod, Node: tc.node, CRRs: tc.crrs, CRRAPI: !tc.noCRR, Now: tc.at, Policy: DefaultPolicy()}
			if in.Node == (Node{}) {
				in.Node = normal
			}
			if in.Now.IsZero() {
				in.Now = now
			}
			if tc.policy != nil {
				in.Policy = *tc.policy
			}
			plan := Decide(in)
			sameAfterTrim(t, in, plan)
			checkPlan(t, tc.want, plan)
			if plan.Reason == "" {
				t.Errorf("plan has no reason")
			}
			// Safety, whatever the row: no action touches a main container.
			assertOnlySidecarsTouched(t, plan)
		})
	}
}

func TestCRRNameIsDeterministicAndValid(t *testing.T) {
	pod := podtest.Pod(strings.Repeat("a", 250)).UID("0f1e2d3c-aaaa-bbbb-cccc-000000000000").Build()
	first, again := CRRName(pod, 1), CRRName(pod, 1)
	if first != again {
		t.Fatalf("CRRName not deterministic: %q vs %q", first, again)
	}
	if len(first) > 253 {
		t.Fatalf("CRRName too long: %d", len(first))
	}
	if !strings.HasSuffix(first, "-0f1e2d3c-st1") || CRRName(pod, 2) == first {
		t.Fatalf("CRRName %q does not carry the pod UID and attempt", first)
	}
}

func TestExplainNamesEveryContainerAndTheDecision(t *testing.T) {
	pod := podtest.Pod("p").NativeSidecar("mesh").Container("main", exited(0)).Container("log", markCRR, markImage).Build()
	plan := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy()})
	var sb strings.Builder
	if err := plan.Explain(&sb); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	for _, want := range []string{"mesh", "native-sidecar", "main", "terminated(0)", "log", "sidecar", "crr, image " + quickExit, "Decision: Act", "ContainerRecreateRequest"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
}

// TestDecideRestartRules: the kubelet's container restart rules (KEP-5307,
// KEP-5532) decide when a main is done and whether a kill can stop a sidecar.
// The first five rows are the table of what the kubelet does with a
// container's own policy and rules where the pod's policy alone misleads.
func TestDecideRestartRules(t *testing.T) {
	never, onFailure, always := corev1.ContainerRestartPolicyNever, corev1.ContainerRestartPolicyOnFailure, corev1.ContainerRestartPolicyAlways
	restartAll := podtest.Rule(corev1.ContainerRestartRuleActionRestartAllContainers, corev1.ContainerRestartRuleOnExitCodesOpIn, 42)
	cases := map[string]struct {
		pod  *corev1.Pod
		node Node
		want want
	}{
		// The table.
		"pod Never, main OnFailure exited 1: the kubelet restarts it, wait": {
			pod:  podtest.Pod("p").Container("main", podtest.Policy(onFailure), exited(1)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictMainsActive},
		},
		"pod Never, main Never with rule Restart on 42 exited 42: wait": {
			pod:  podtest.Pod("p").Container("main", podtest.Policy(never), podtest.RestartOn(42), exited(42)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictMainsActive},
		},
		"pod OnFailure, main Always exited 0: wait": {
			pod:  podtest.Pod("p").OnFailure().Container("main", podtest.Policy(always), exited(0)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictMainsActive},
		},
		"pod OnFailure, main Never exited 1: done, CRR": {
			pod:  podtest.Pod("p").OnFailure().Container("main", podtest.Policy(never), exited(1)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}},
		},
		"pod Never, ignore-exit-code sidecar, main rule Restart on 42 exited 42: no phase settled": {
			pod:  podtest.Pod("p").Container("main", podtest.Policy(never), podtest.RestartOn(42), exited(42)).Container("proxy", markCRR, ignoreRC).Build(),
			want: want{verdict: VerdictMainsActive},
		},

		// The same rows on a virtual node (image swap).
		"virtual: pod Never, main OnFailure exited 1: wait": {
			pod:  podtest.Pod("p").Container("main", podtest.Policy(onFailure), exited(1)).Container("log", markImage).Build(),
			node: virtual, want: want{verdict: VerdictMainsActive},
		},
		"virtual: pod Never, main rule Restart on 42 exited 42: wait": {
			pod:  podtest.Pod("p").Container("main", podtest.Policy(never), podtest.RestartOn(42), exited(42)).Container("log", markImage).Build(),
			node: virtual, want: want{verdict: VerdictMainsActive},
		},
		"virtual: pod OnFailure, main Always exited 0: wait": {
			pod:  podtest.Pod("p").OnFailure().Container("main", podtest.Policy(always), exited(0)).Container("log", markImage).Build(),
			node: virtual, want: want{verdict: VerdictMainsActive},
		},
		"virtual: pod OnFailure, main Never exited 1: image swap": {
			pod:  podtest.Pod("p").OnFailure().Container("main", podtest.Policy(never), exited(1)).Container("log", markImage).Build(),
			node: virtual, want: want{verdict: VerdictAct, actions: []Action{swapOf(1, "log", img("log"))}},
		},
		"virtual: ignore-exit-code sidecar, main rule Restart on 42 exited 42: no phase settled": {
			pod:  podtest.Pod("p").Container("main", podtest.Policy(never), podtest.RestartOn(42), exited(42)).Container("proxy", markImage, ignoreRC).Build(),
			node: virtual, want: want{verdict: VerdictMainsActive},
		},

		// Rules around the table's rows.
		"main rule Restart on 42 exited 0 under Never: done": {
			pod:  podtest.Pod("p").Container("main", podtest.Policy(never), podtest.RestartOn(42), exited(0)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}},
		},
		"main rule Restart NotIn [0] exited 3 under Never: wait": {
			pod: podtest.Pod("p").Container("main", podtest.Policy(never), podtest.Rule(corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleOnExitCodesOpNotIn, 0), exited(3)).
				Container("log", markCRR).Build(),
			want: want{verdict: VerdictMainsActive},
		},
		"rules without the container's own policy are not read: pod Never, exited 42, done": {
			pod:  podtest.Pod("p").Container("main", podtest.RestartOn(42), exited(42)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}},
		},
		"first matching rule wins: a later Restart is not reached": {
			pod: podtest.Pod("p").Container("main", podtest.Policy(never),
				podtest.Rule(corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleOnExitCodesOpIn, 7), podtest.RestartOn(42), exited(42)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictMainsActive},
		},
		"two mains, one restarts by its rule: wait": {
			pod: podtest.Pod("p").Container("a", exited(0)).Container("b", podtest.Policy(never), podtest.RestartOn(42), exited(42)).
				Container("log", markCRR).Build(),
			want: want{verdict: VerdictMainsActive},
		},
		"RestartAllContainers rule matched on the main: the pod restarts in place, wait": {
			pod:  podtest.Pod("p").Container("main", podtest.Policy(never), restartAll, exited(42)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictMainsActive},
		},
		"condition AllContainersRestarting: left alone even with every main done": {
			pod: podtest.Pod("p").Condition(corev1.AllContainersRestarting, corev1.ConditionTrue).
				Container("main", exited(0)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictMainsActive},
		},
		"a container stopped to restart the pod in place: left alone": {
			pod: podtest.Pod("p").Container("main", exited(0)).Container("aux", podtest.Policy(never), restartAll, exited(42)).
				Container("log", markCRR).Build(),
			want: want{verdict: VerdictMainsActive},
		},

		// Sidecars with their own policy.
		"sidecar restartPolicy Always: a kill cannot stop it, Warning, no action": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, podtest.Policy(always)).Build(),
			want: want{verdict: VerdictNoPath, problems: []string{ReasonSidecarRestartsAfterKill}},
		},
		"virtual: sidecar restartPolicy Always: no swap, Warning": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markImage, podtest.Policy(always)).Build(),
			node: virtual, want: want{verdict: VerdictNoPath, problems: []string{ReasonSidecarRestartsAfterKill}},
		},
		"sidecar rule Restart on 0: a kill cannot stop it, the other sidecar is stopped": {
			pod: podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, podtest.Policy(never), podtest.RestartOn(0)).
				Container("proxy", markCRR).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "proxy")}, problems: []string{ReasonSidecarRestartsAfterKill}},
		},
		"sidecar restartPolicy OnFailure: a graceful stop ends it, CRR": {
			pod:  podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, podtest.Policy(onFailure)).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}},
		},
		"sidecar restartPolicy Never under pod OnFailure: CRR": {
			pod:  podtest.Pod("p").OnFailure().Container("main", exited(0)).Container("log", markCRR, podtest.Policy(never)).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}},
		},

		// Rules on init containers and native sidecars: still never touched.
		"init container with a rule, native sidecar with a policy: only the regular sidecar is stopped": {
			pod: podtest.Pod("p").Init("setup", podtest.Policy(never), podtest.RestartOn(42)).NativeSidecar("mesh", markCRR).
				Container("main", exited(0)).Container("log", markCRR).Build(),
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			node := tc.node
			if node.Name == "" {
				node = normal
			}
			plan := Decide(Input{Pod: tc.pod, Node: node, CRRAPI: true, Now: now, Policy: DefaultPolicy()})
			checkPlan(t, tc.want, plan)
			for _, a := range plan.Actions {
				for _, c := range a.Containers {
					if c == "main" || c == "mesh" || c == "setup" {
						t.Errorf("action %s touches %q", a.Kind, c)
					}
				}
			}
		})
	}
}

func TestExplainShowsEachMainsRestartRule(t *testing.T) {
	pod := podtest.Pod("p").Container("a", exited(0)).
		Container("b", podtest.Policy(corev1.ContainerRestartPolicyNever), podtest.RestartOn(42), exited(42)).
		Container("c").Container("log", markCRR).Build()
	plan := Decide(Input{Pod: pod, Node: normal, CRRAPI: true, Now: now, Policy: DefaultPolicy()})
	var sb strings.Builder
	if err := plan.Explain(&sb); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	for _, want := range []string{
		`main "a" follows pod restartPolicy Never: exited 0, and pod restartPolicy Never does not run it again: done`,
		`main "b" follows container restartPolicy Never; rule 1: Restart on exit codes In [42]: exited 42, and rule 1 (Restart on exit codes In [42]) runs it again: not done`,
		`main "c" follows pod restartPolicy Never: running, not done`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `main "log"`) {
		t.Errorf("explain gives the sidecar a main's restart line:\n%s", out)
	}
}

// assertOnlySidecarsTouched is the safety check every decision table runs,
// whatever the row: no action names a container that is not a sidecar.
func assertOnlySidecarsTouched(t *testing.T, plan Plan) {
	t.Helper()
	for _, a := range plan.Actions {
		for _, c := range a.Containers {
			for _, ctr := range plan.Containers {
				if ctr.Name == c && ctr.Role != RoleSidecar {
					t.Errorf("action %s touches %s container %q", a.Kind, ctr.Role, c)
				}
			}
		}
	}
}
