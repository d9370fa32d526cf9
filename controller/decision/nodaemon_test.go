package decision_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// A normal node where OpenKruise's objects show no kruise-daemon is treated
// like a virtual node: an image swap where an image is known (the
// operator's default too), else NoTerminationPath at once, never a CRR that
// would only wait for its deadline.
func TestDecideNodeWithoutDaemon(t *testing.T) {
	noDaemon := Node{Name: "node-1", Found: true, Daemon: DaemonAbsent, DaemonWhy: "its NodeImage was never written by kruise-daemon"}
	crrOnly := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR).Build()
	withImage := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, markImage).Build()
	cases := map[string]struct {
		pod          *corev1.Pod
		node         Node
		defaultImage string
		want         want
	}{
		"no daemon, image known: swap, no CRR": {
			pod: withImage, node: noDaemon,
			want: want{verdict: VerdictAct, actions: []Action{swapOf(1, "log", img("log"))}},
		},
		"no daemon, no image: NoTerminationPath at once": {
			pod: crrOnly, node: noDaemon,
			want: want{verdict: VerdictNoPath, problems: []string{ReasonNoTerminationPath}},
		},
		"no daemon, the operator's default image: swap to it": {
			pod: crrOnly, node: noDaemon, defaultImage: defaultImage,
			want: want{verdict: VerdictAct, actions: []Action{swapToDefault(1, "log", img("log"))}},
		},
		"daemon serves the node: CRR as before": {
			pod: withImage, node: Node{Name: "node-1", Found: true, DaemonWhy: "kruise-daemon wrote its NodeImage status"},
			want: want{verdict: VerdictAct, actions: []Action{crrFor("p", 1, "log")}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := DefaultPolicy()
			p.DefaultQuickExitImage = tc.defaultImage
			plan := Decide(Input{Pod: tc.pod, Node: tc.node, CRRAPI: true, Now: now, Policy: p})
			checkPlan(t, tc.want, plan)
			assertOnlySidecarsTouched(t, plan)
			var sb strings.Builder
			if err := plan.Explain(&sb); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(sb.String(), "Node:     ") || !strings.Contains(sb.String(), tc.node.DaemonWhy) {
				t.Errorf("explain does not say which path the node has and why:\n%s", sb.String())
			}
		})
	}
}
