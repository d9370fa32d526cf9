package decision_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// The nodes of each platform as the platform's own nodes describe
// themselves (decision/platform.go cites where each is from).
var platformFacts = map[Platform]NodeFacts{
	PlatformNode: {Name: "ip-10-0-1-1", Labels: map[string]string{"kubernetes.io/os": "linux"}, KubeletVersion: "v1.37.2", ProviderID: "aws:///us-east-1a/i-0abc"},
	PlatformEKSFargate: {Name: "fargate-ip-10-0-1-2.ec2.internal", Labels: map[string]string{LabelEKSComputeType: "fargate"},
		KubeletVersion: "v1.33.5-eks-ecaa3a6", ProviderID: "aws:///us-east-1a/fargate-ip-10-0-1-2"},
	PlatformGKEAutopilot:   {Name: "gk3-prod-pool-2-1a2b3c4d-x9zq", KubeletVersion: "v1.33.5-gke.1000", ProviderID: "gce://proj/us-central1-a/gk3-prod-pool-2-1a2b3c4d-x9zq"},
	PlatformAzureACI:       {Name: "virtual-node-aci-linux", Labels: map[string]string{"type": "virtual-kubelet"}, KubeletVersion: "v1.25.0-vk-azure-aci-1.6.4"},
	PlatformAlibabaECI:     {Name: "virtual-kubelet-cn-hangzhou-b", Labels: map[string]string{"type": "virtual-kubelet"}, KubeletVersion: "v1.16.9-aliyun.1"},
	PlatformVirtualKubelet: {Name: "vk-mock-1", Labels: map[string]string{"type": "virtual-kubelet"}, KubeletVersion: "v1.14.1"},
}

func TestPlatformOfRecognisesEachPlatformFromWhatItsNodesSay(t *testing.T) {
	for want, f := range platformFacts {
		virtual := f.Labels["type"] == "virtual-kubelet"
		got, why := PlatformOf(f, virtual)
		if got != want || why == "" {
			t.Errorf("PlatformOf(%s) = %s (%q), want %s with a reason", f.Name, got, why, want)
		}
	}
	near := map[string]struct {
		f       NodeFacts
		virtual bool
	}{
		// ACK's own machines report Alibaba's kubelet build too.
		"an ACK machine":               {NodeFacts{Name: "cn-hangzhou.10.0.0.1", KubeletVersion: "v1.30.1-aliyun.1"}, false},
		"a GKE Standard machine":       {NodeFacts{Name: "gke-prod-pool-1-abc", ProviderID: "gce://proj/us-central1-a/gke-prod-pool-1-abc"}, false},
		"a gk3- name off GCE":          {NodeFacts{Name: "gk3-lab", ProviderID: "kind://docker/kind/gk3-lab"}, false},
		"an EKS managed node group":    {NodeFacts{Name: "ip-10-0-0-1", Labels: map[string]string{LabelEKSComputeType: "ec2"}}, false},
		"no facts at all":              {NodeFacts{Name: "n"}, false},
		"an unknown provider's vk tag": {NodeFacts{Name: "n", KubeletVersion: "v1.30.0-vk-other-1"}, false},
	}
	for name, tc := range near {
		if got, _ := PlatformOf(tc.f, tc.virtual); got != PlatformNode {
			t.Errorf("%s: PlatformOf = %s, want %s", name, got, PlatformNode)
		}
	}
}

func platformNode(p Platform) Node {
	f := platformFacts[p]
	plat, why := PlatformOf(f, f.Labels["type"] == "virtual-kubelet")
	// DaemonUnknown: a node younger than the daemon grace, as a Fargate
	// node is for most Jobs.
	return Node{Name: f.Name, Found: true, Virtual: f.Labels["type"] == "virtual-kubelet", Platform: plat, PlatformWhy: why}
}

// Each platform gets the path that works there, at once: a CRR only where
// kruise-daemon can run, the swap where the node honours it, and on ACI,
// where neither stops a container, the phase settled with a Warning and no
// swap.
func TestDecidePathByPlatform(t *testing.T) {
	pod := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, markImage).Build()
	crrOnly := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR).Build()
	cases := map[string]struct {
		pod      *corev1.Pod
		platform Platform
		want     ActionKind
		problem  string
	}{
		"normal node, daemon not yet shown: CRR":              {pod, PlatformNode, ActionCreateCRR, ""},
		"EKS Fargate, young node: swap, no CRR":               {pod, PlatformEKSFargate, ActionSwapImage, ""},
		"GKE Autopilot: swap, no CRR":                         {pod, PlatformGKEAutopilot, ActionSwapImage, ""},
		"Alibaba ECI: swap":                                   {pod, PlatformAlibabaECI, ActionSwapImage, ""},
		"virtual-kubelet: swap":                               {pod, PlatformVirtualKubelet, ActionSwapImage, ""},
		"Azure ACI: settle with a Warning, no swap":           {pod, PlatformAzureACI, ActionSettlePhase, ReasonSidecarLeftRunning},
		"Azure ACI, CRR mark only: settle too":                {crrOnly, PlatformAzureACI, ActionSettlePhase, ReasonSidecarLeftRunning},
		"EKS Fargate, CRR mark only: no path at once, no CRR": {crrOnly, PlatformEKSFargate, "", ReasonNoTerminationPath},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan := Decide(Input{Pod: tc.pod, Node: platformNode(tc.platform), CRRAPI: true, Now: now, Policy: DefaultPolicy()})
			var kinds []ActionKind
			for _, a := range plan.Actions {
				kinds = append(kinds, a.Kind)
			}
			switch {
			case tc.want == "" && len(kinds) != 0, tc.want != "" && (len(kinds) != 1 || kinds[0] != tc.want):
				t.Fatalf("actions %v, want [%s]; reason: %s", kinds, tc.want, plan.Reason)
			}
			var reasons []string
			for _, p := range plan.Problems {
				reasons = append(reasons, p.Reason)
			}
			if tc.problem != "" && (len(reasons) != 1 || reasons[0] != tc.problem) {
				t.Errorf("problems %v, want [%s]", reasons, tc.problem)
			}
			if tc.problem == "" && len(reasons) != 0 {
				t.Errorf("problems %v, want none", reasons)
			}
			if tc.want == ActionSettlePhase {
				a := plan.Actions[0]
				if a.Phase != corev1.PodSucceeded || !a.LeftRunning || len(a.Containers) != 1 || a.Containers[0] != "log" {
					t.Errorf("settle %+v, want phase Succeeded from the mains, log left running", a)
				}
				if msg := plan.Problems[0].Message; !strings.Contains(msg, "ttlSecondsAfterFinished") || !strings.Contains(msg, "billed") {
					t.Errorf("the Warning does not say what keeps running and costing, and what deletes it: %s", msg)
				}
			}
			assertOnlySidecarsTouched(t, plan)
		})
	}
}

// On ACI a pod whose phase was settled is done: nothing more is planned,
// not the stop after the grace period an ignore-exit-code sidecar gets
// elsewhere, and a failed main settles Failed.
func TestDecideACISettledIsDone(t *testing.T) {
	settled := podtest.Pod("p").Phase(corev1.PodSucceeded).ConditionAt(ConditionSidecarTerminated, corev1.ConditionTrue, exitAt).
		Container("main", exited(0)).Container("log", markImage, ignoreRC, podtest.Running()).Build()
	plan := Decide(Input{Pod: settled, Node: platformNode(PlatformAzureACI), CRRAPI: true, Now: now.Add(10 * time.Minute), Policy: DefaultPolicy()})
	if plan.Verdict != VerdictDone || len(plan.Actions) != 0 || len(plan.Problems) != 0 {
		t.Errorf("settled pod on ACI: %s, actions %v, problems %v; want done, nothing", plan.Verdict, plan.Actions, plan.Problems)
	}
	failed := podtest.Pod("p").Container("main", exited(3)).Container("log", markImage).Build()
	plan = Decide(Input{Pod: failed, Node: platformNode(PlatformAzureACI), CRRAPI: true, Now: now, Policy: DefaultPolicy()})
	if len(plan.Actions) != 1 || plan.Actions[0].Phase != corev1.PodFailed {
		t.Errorf("failed main on ACI: actions %v, want the phase settled Failed", plan.Actions)
	}
}

// ECI's own mark: on ECI the marked container is ECI's to stop, neither
// waited for as a main container nor stopped by the controller; elsewhere
// the mark means nothing.
func TestDecideLeavesECIMarkedSidecarsToECI(t *testing.T) {
	eciMark := podtest.Env(EnvECIContainerType, "sidecar")
	pod := podtest.Pod("p").Container("main", exited(0)).Container("agent", eciMark, podtest.Running()).Container("proxy", markImage, podtest.Running()).Build()
	plan := Decide(Input{Pod: pod, Node: platformNode(PlatformAlibabaECI), CRRAPI: true, Now: now, Policy: DefaultPolicy()})
	if len(plan.Actions) != 1 || plan.Actions[0].Kind != ActionSwapImage || len(plan.Actions[0].Swaps) != 1 || plan.Actions[0].Swaps[0].Container != "proxy" {
		t.Fatalf("actions %+v, want the swap of proxy only", plan.Actions)
	}
	proxyDone := podtest.Pod("p").Container("main", exited(0)).Container("agent", eciMark, podtest.Running()).Container("proxy", markImage, exited(0)).Build()
	plan = Decide(Input{Pod: proxyDone, Node: platformNode(PlatformAlibabaECI), CRRAPI: true, Now: now, Policy: DefaultPolicy()})
	if plan.Verdict != VerdictInProgress || len(plan.Actions) != 0 || !strings.Contains(plan.Reason, "ECI_CONTAINER_TYPE=sidecar") {
		t.Errorf("%s %v: %s; want waiting for ECI, no action", plan.Verdict, plan.Actions, plan.Reason)
	}
	plan = Decide(Input{Pod: pod, Node: platformNode(PlatformNode), CRRAPI: true, Now: now, Policy: DefaultPolicy()})
	if plan.Verdict != VerdictMainsActive {
		t.Errorf("off ECI: %s (%s); want the ECI-marked container waited for as a main", plan.Verdict, plan.Reason)
	}
}

// explain names the node's platform and how it is known.
func TestExplainNamesThePlatform(t *testing.T) {
	pod := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, markImage).Build()
	for _, p := range Platforms() {
		var sb strings.Builder
		plan := Decide(Input{Pod: pod, Node: platformNode(p), CRRAPI: true, Now: now, Policy: DefaultPolicy()})
		if err := plan.Explain(&sb); err != nil {
			t.Fatal(err)
		}
		_, why := PlatformOf(platformFacts[p], platformFacts[p].Labels["type"] == "virtual-kubelet")
		if !strings.Contains(sb.String(), string(p)) || !strings.Contains(sb.String(), why) {
			t.Errorf("%s: explain does not name the platform and why (%s):\n%s", p, why, sb.String())
		}
	}
}
