// Package kubeletrules compares the decision's restart rules
// (controller/decision/restart.go) with the kubelet's own functions over every
// combination of pod policy, container policy, rules and exit code, at each
// Kubernetes release upstream supports: go.mod is v1.37.2, go.v1.36.mod
// v1.36.3 and go.v1.35.mod v1.35.4 (go test -modfile=go.v1.36.mod ./...).
package kubeletrules

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/features"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

var (
	podPolicies = []corev1.RestartPolicy{corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure, corev1.RestartPolicyAlways, ""}
	// nil: the container sets no policy of its own.
	containerPolicies = []*corev1.ContainerRestartPolicy{nil, ptr(corev1.ContainerRestartPolicyAlways),
		ptr(corev1.ContainerRestartPolicyOnFailure), ptr(corev1.ContainerRestartPolicyNever)}
	exitCodes = []int32{0, 1, 42, 137, 143}
)

// ruleSets: none, each action with each operator, first-match-wins pairs, and
// a rule without exit codes (which matches nothing).
func ruleSets() map[string][]corev1.ContainerRestartRule {
	restart, all := corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleActionRestartAllContainers
	in, notIn := corev1.ContainerRestartRuleOnExitCodesOpIn, corev1.ContainerRestartRuleOnExitCodesOpNotIn
	r := func(a corev1.ContainerRestartRuleAction, op corev1.ContainerRestartRuleOnExitCodesOperator, v ...int32) corev1.ContainerRestartRule {
		return corev1.ContainerRestartRule{Action: a, ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: op, Values: v}}
	}
	return map[string][]corev1.ContainerRestartRule{
		"none":                     nil,
		"Restart In [42]":          {r(restart, in, 42)},
		"Restart In [0 42]":        {r(restart, in, 0, 42)},
		"Restart NotIn [0]":        {r(restart, notIn, 0)},
		"Restart NotIn [42 137]":   {r(restart, notIn, 42, 137)},
		"RestartAll In [42]":       {r(all, in, 42)},
		"RestartAll NotIn [0 143]": {r(all, notIn, 0, 143)},
		"RestartAll In [137], then Restart NotIn [0]": {r(all, in, 137), r(restart, notIn, 0)},
		"Restart In [143], then RestartAll NotIn [0]": {r(restart, in, 143), r(all, notIn, 0)},
		"no exit codes, then Restart In [1]":          {{Action: restart}, r(restart, in, 1)},
		"unknown action In [42]":                      {r("Wait", in, 42)},
	}
}

type row struct {
	podPolicy corev1.RestartPolicy
	policy    *corev1.ContainerRestartPolicy
	rules     string
	exit      int32
}

func (r row) String() string {
	policy := "unset"
	if r.policy != nil {
		policy = string(*r.policy)
	}
	return fmt.Sprintf("pod %q, container %s, rules %s, exit %d", r.podPolicy, policy, r.rules, r.exit)
}

// forEachRow calls f for every combination.
func forEachRow(f func(row, corev1.Container, *corev1.Pod)) {
	for _, podPolicy := range podPolicies {
		for _, policy := range containerPolicies {
			for name, rules := range ruleSets() {
				for _, exit := range exitCodes {
					c := corev1.Container{Name: "main", RestartPolicy: policy, RestartPolicyRules: rules}
					pod := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: podPolicy, Containers: []corev1.Container{c}}}
					f(row{podPolicy, policy, name, exit}, c, pod)
				}
			}
		}
	}
}

// kubelet asks both of the kubelet's functions and fails the test when they
// disagree with each other.
func kubelet(t *testing.T, r row, c corev1.Container, pod *corev1.Pod) bool {
	t.Helper()
	viaPod := podutil.ContainerShouldRestart(c, pod.Spec, r.exit)
	status := &kubecontainer.PodStatus{ContainerStatuses: []*kubecontainer.Status{{Name: c.Name, State: kubecontainer.ContainerStateExited, ExitCode: int(r.exit)}}}
	viaKubelet := kubecontainer.ShouldContainerBeRestarted(klog.Background(), &c, pod, status)
	if viaPod != viaKubelet {
		t.Errorf("%s: the kubelet's own functions disagree: ContainerShouldRestart %v, ShouldContainerBeRestarted %v", r, viaPod, viaKubelet)
	}
	return viaKubelet
}

// With both gates on (ContainerRestartRules is on by default from 1.35;
// RestartAllContainersOnContainerExits from 1.36, and on wherever an API
// server admits the RestartAllContainers action), every row agrees.
func TestRestartRulesMatchTheKubelet(t *testing.T) {
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{
		features.ContainerRestartRules:                true,
		features.NodeDeclaredFeatures:                 true,
		features.RestartAllContainersOnContainerExits: true,
	})
	rows, disagreements := 0, 0
	forEachRow(func(r row, c corev1.Container, pod *corev1.Pod) {
		rows++
		want := kubelet(t, r, c, pod)
		got := decision.ContainerRestart(pod.Spec.RestartPolicy, &c, r.exit)
		if got.Again != want {
			disagreements++
			t.Errorf("%s: kubelet restarts=%v, decision restarts=%v (%s)", r, want, got.Again, got.Rule)
		}
	})
	t.Logf("compared %d rows with the kubelet %s (gates ContainerRestartRules, RestartAllContainersOnContainerExits on): %d disagreements", rows, kubernetesVersion(), disagreements)
	if rows != len(podPolicies)*len(containerPolicies)*len(ruleSets())*len(exitCodes) {
		t.Fatalf("compared %d rows, fewer than the table holds", rows)
	}
}

// At the release's own default gates. From 1.36 on
// (RestartAllContainersOnContainerExits beta and on) every row agrees. At
// 1.35 (alpha, off) the kubelet falls back to the container's policy when a
// RestartAllContainers rule matches; the decision still counts such an exit
// as a restart, the safe side (an API server with the gate off refuses the
// action, so no such pod exists there): those rows, and only those, may
// differ, and only that way round.
func TestRestartRulesAtTheDefaultGates(t *testing.T) {
	gateOn := utilfeature.DefaultFeatureGate.Enabled(features.RestartAllContainersOnContainerExits)
	if !utilfeature.DefaultFeatureGate.Enabled(features.ContainerRestartRules) {
		t.Fatalf("%s: ContainerRestartRules is off by default; the decision reads restartPolicyRules", kubernetesVersion())
	}
	rows, conservative := 0, 0
	forEachRow(func(r row, c corev1.Container, pod *corev1.Pod) {
		rows++
		want := kubelet(t, r, c, pod)
		got := decision.ContainerRestart(pod.Spec.RestartPolicy, &c, r.exit)
		switch {
		case got.Again == want:
		case !gateOn && got.AllContainers && got.Again && !want:
			conservative++
		default:
			t.Errorf("%s: kubelet restarts=%v, decision restarts=%v (%s)", r, want, got.Again, got.Rule)
		}
	})
	t.Logf("kubelet %s at its default gates (RestartAllContainersOnContainerExits %v): %d rows, %d disagreements, %d differ as a matched RestartAllContainers rule counted as a restart",
		kubernetesVersion(), gateOn, rows, 0, conservative)
	if gateOn && conservative != 0 {
		t.Fatalf("%d conservative rows with the gate on", conservative)
	}
}

// A stop of a sidecar is safe, as the kubelet answers it at the release's
// default gates, when neither of these follows any exit a stop produces (0,
// 143, 137): the kubelet runs the sidecar again after a graceful exit
// (ContainerShouldRestart on 0), or it restarts every container of the pod
// (ShouldAllContainersRestart, called by the kubelet only with the gate on).
// The decision must refuse every stop the kubelet would turn into either,
// and may refuse more only where the gate is off.
func TestStopSafetyMatchesTheKubelet(t *testing.T) {
	gateOn := utilfeature.DefaultFeatureGate.Enabled(features.RestartAllContainersOnContainerExits)
	rows, conservative, blocked := 0, 0, 0
	for _, podPolicy := range []corev1.RestartPolicy{corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure} {
		for _, policy := range containerPolicies {
			for name, rules := range ruleSets() {
				rows++
				r := row{podPolicy: podPolicy, policy: policy, rules: name}
				side := corev1.Container{Name: "proxy", RestartPolicy: policy, RestartPolicyRules: rules,
					Env: []corev1.EnvVar{{Name: decision.EnvTerminate, Value: "true"}}}
				spec := corev1.PodSpec{RestartPolicy: podPolicy, Containers: []corev1.Container{{Name: "main"}, side}}
				unsafe := podutil.ContainerShouldRestart(side, spec, decision.ExitGraceful)
				for _, exit := range decision.StopExits {
					pod := &corev1.Pod{Spec: spec, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
						{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
						{Name: "proxy", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit}}}}}}
					unsafe = unsafe || (gateOn && kubecontainer.ShouldAllContainersRestart(pod, nil, &pod.Status))
				}
				got := stopRefused(t, spec)
				switch {
				case got == unsafe:
				case got && !gateOn:
					conservative++
				default:
					t.Errorf("%s: the kubelet makes a stop unsafe=%v, the decision refuses it=%v", r, unsafe, got)
				}
				if got {
					blocked++
				}
			}
		}
	}
	t.Logf("kubelet %s at its default gates (RestartAllContainersOnContainerExits %v): %d sidecars, %d stops refused, %d refused where the kubelet would not restart (gate off)",
		kubernetesVersion(), gateOn, rows, blocked, conservative)
}

// stopRefused asks the decision whether it refuses every stop of the sidecar
// "proxy" once the main "main" has exited 0.
func stopRefused(t *testing.T, spec corev1.PodSpec) bool {
	t.Helper()
	pod := &corev1.Pod{Spec: spec, Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
		{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
		{Name: "proxy", ContainerID: "containerd://p", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	pod.Name, pod.Namespace, pod.UID, pod.Spec.NodeName = "p", "ns", "u", "node-1"
	plan := decision.Decide(decision.Input{Pod: pod, Node: decision.Node{Name: "node-1", Found: true}, CRRAPI: true, Policy: decision.DefaultPolicy()})
	switch {
	case plan.Verdict == decision.VerdictNoPath && len(plan.Actions) == 0:
		return true
	case plan.Verdict == decision.VerdictAct && len(plan.Actions) == 1:
		return false
	}
	t.Fatalf("decision for %+v: %s (%s), actions %v", spec.Containers[1], plan.Verdict, plan.Reason, plan.Actions)
	return false
}

// kubernetesVersion is the k8s.io/kubernetes this test was built with, read
// from where the kubelet's function was compiled from (module@version/...:
// test binaries carry no module list).
func kubernetesVersion() string {
	file, _ := runtime.FuncForPC(reflect.ValueOf(podutil.ContainerShouldRestart).Pointer()).FileLine(0)
	if _, after, ok := strings.Cut(file, "k8s.io/kubernetes@"); ok {
		v, _, _ := strings.Cut(after, "/")
		return v
	}
	return "unknown (" + file + ")"
}

// The pod-level question, "is the pod restarting all its containers in
// place?", read from the API status as the kubelet's ShouldAllContainersRestart
// reads it.
func TestRestartingAllContainersMatchesTheKubelet(t *testing.T) {
	rows := 0
	forEachRow(func(r row, c corev1.Container, pod *corev1.Pod) {
		for _, condition := range []bool{false, true} {
			rows++
			pod := pod.DeepCopy()
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: r.exit, Reason: "Error"}}}}
			if condition {
				pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.AllContainersRestarting, Status: corev1.ConditionTrue}}
			}
			want := kubecontainer.ShouldAllContainersRestart(pod, nil, &pod.Status)
			if got := decision.RestartingAllContainers(pod); got != want {
				t.Errorf("%s, condition AllContainersRestarting %v: kubelet restarting all=%v, decision %v", r, condition, want, got)
			}
		}
	})
	t.Logf("compared %d pod statuses with the kubelet's ShouldAllContainersRestart", rows)
}

func ptr[T any](v T) *T { return &v }
