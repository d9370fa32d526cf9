package reconciler_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// Every condition type a pod can carry, the decision's and the others.
var conditionTypes = []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled, corev1.PodInitialized,
	corev1.PodReadyToStartContainers, corev1.DisruptionTarget, corev1.AllContainersRestarting, decision.ConditionSidecarTerminated}

// randomPod is a pod the decision may see: random policy, marks, phase,
// container states and conditions.
func randomPod(rng *rand.Rand) *corev1.Pod {
	b := podtest.Pod("p")
	if rng.IntN(2) == 0 {
		b.OnFailure()
	}
	b.Phase([]corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}[rng.IntN(4)])
	for i, n := 0, 1+rng.IntN(3); i < n; i++ {
		b.Container(fmt.Sprintf("c%d", i), randomContainer(rng)...)
	}
	if rng.IntN(4) == 0 {
		b.Annotate(decision.AnnotationSidecars, "c1")
	}
	for _, t := range conditionTypes {
		if rng.IntN(3) == 0 {
			b.ConditionAt(t, []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse}[rng.IntN(2)], podtest.Epoch.Add(time.Duration(rng.IntN(60))*time.Second))
		}
	}
	p := b.Build()
	p.ResourceVersion = fmt.Sprint(rng.IntN(1000))
	return p
}

func randomContainer(rng *rand.Rand) []podtest.Option {
	var opts []podtest.Option
	switch rng.IntN(4) {
	case 0:
		opts = append(opts, podtest.Env(decision.EnvTerminate, "true"))
	case 1:
		opts = append(opts, podtest.Env(decision.EnvTerminateWithImage, "ghcr.io/sidecar-terminator/quick-exit:v1"))
	}
	switch rng.IntN(4) {
	case 0:
		opts = append(opts, podtest.Exited(int32(rng.IntN(2)), podtest.Epoch.Add(time.Duration(rng.IntN(60))*time.Second)))
	case 1:
		opts = append(opts, podtest.Waiting("CrashLoopBackOff", podtest.Int32(1)))
	case 2:
		opts = append(opts, podtest.Restarts(int32(rng.IntN(3))))
	}
	return opts
}

// mutate changes one random thing about the pod, the kind of change the
// kubelet, a user or another controller makes: some the decision reads,
// some it does not.
func mutate(rng *rand.Rand, p *corev1.Pod) {
	switch rng.IntN(13) {
	case 0:
		p.ResourceVersion += "1"
	case 12:
		// A sidecar marked, or unmarked, by the annotation.
		if rng.IntN(2) == 0 {
			p.Annotations = map[string]string{decision.AnnotationSidecars: p.Spec.Containers[rng.IntN(len(p.Spec.Containers))].Name}
		} else {
			delete(p.Annotations, decision.AnnotationSidecars)
		}
	case 1, 2:
		if len(p.Status.Conditions) > 0 {
			c := &p.Status.Conditions[rng.IntN(len(p.Status.Conditions))]
			if c.Status == corev1.ConditionTrue {
				c.Status = corev1.ConditionFalse
			} else {
				c.Status = corev1.ConditionTrue
			}
		}
	case 3:
		if len(p.Status.Conditions) > 0 {
			c := &p.Status.Conditions[rng.IntN(len(p.Status.Conditions))]
			c.LastTransitionTime = metav1.NewTime(c.LastTransitionTime.Add(time.Second))
			c.LastProbeTime = metav1.NewTime(podtest.Epoch.Add(time.Minute))
		}
	case 4:
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: conditionTypes[rng.IntN(len(conditionTypes))], Status: corev1.ConditionTrue})
	case 5:
		if n := len(p.Status.Conditions); n > 0 {
			i := rng.IntN(n)
			p.Status.Conditions = append(p.Status.Conditions[:i:i], p.Status.Conditions[i+1:]...)
		}
	case 6:
		i := rng.IntN(len(p.Status.ContainerStatuses))
		p.Status.ContainerStatuses[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: int32(rng.IntN(2)), FinishedAt: metav1.NewTime(podtest.Epoch.Add(30 * time.Second))}}
	case 7:
		p.Status.ContainerStatuses[rng.IntN(len(p.Status.ContainerStatuses))].RestartCount++
	case 8:
		p.Spec.Containers[rng.IntN(len(p.Spec.Containers))].Image = "ghcr.io/sidecar-terminator/quick-exit:v1"
	case 9:
		p.Status.Phase = []corev1.PodPhase{corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}[rng.IntN(3)]
	case 10:
		p.Annotations = map[string]string{decision.AnnotationCRRAttempts: "2"}
	case 11:
		now := metav1.NewTime(podtest.Epoch)
		p.DeletionTimestamp = &now
	}
}

// The update filter's proof over random pod pairs: whenever it drops an
// update, the decision on the old and the new pod is the same (for a pod
// ignored on both sides, the verdict), whatever the node, the CRRs and the
// time. And it does drop (a filter that keeps
// everything proves nothing).
func TestPodUpdateFilterNeverDropsAChangedDecision(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 0))
	dropped, kept, unmarked := 0, 0, 0
	for i := 0; i < 20000; i++ {
		old := randomPod(rng)
		new := old.DeepCopy()
		for n := 1 + rng.IntN(2); n > 0; n-- {
			mutate(rng, new)
		}
		if reconciler.PodUpdateMatters(old, new) {
			kept++
			continue
		}
		dropped++
		in := decision.Input{Node: decision.Node{Name: "node-1", Found: true, Virtual: rng.IntN(2) == 0}, CRRAPI: rng.IntN(4) != 0,
			Now: podtest.Epoch.Add(time.Duration(rng.IntN(300)) * time.Second), Policy: decision.DefaultPolicy()}
		if rng.IntN(2) == 0 {
			in.CRRs = []decision.CRR{{Name: decision.CRRName(old, 1), Attempt: 1, Containers: []string{"c1"}, Phase: "Pending",
				Created: podtest.Epoch.Add(20 * time.Second)}}
		}
		a, b := in, in
		a.Pod, b.Pod = old, new
		pa, pb := decision.Decide(a), decision.Decide(b)
		if pa.Verdict == decision.VerdictIgnored && pb.Verdict == decision.VerdictIgnored {
			// Ignored either way (the sync forgets the pod, nothing else);
			// only the reason's words may differ, and a finished pod's
			// Warning (SidecarFailedPod), which the update that finished
			// it, kept by the filter, has already raised.
			pa.Reason, pb.Reason = "", ""
			pa.Problems, pb.Problems = nil, nil
		}
		if pa.DoesNothing() && pb.DoesNothing() {
			// Nothing marked, nothing to warn of, on both sides: the sync
			// would write and warn nothing either way; only the verdict's
			// name, the containers' states and a read-only look for
			// OpenKruise's CRR (asked for when one of ours is Pending) may
			// differ, and with no sidecar marked on either side there is
			// nothing of the pod for OpenKruise's SidecarTerminator to stop
			// (it reads the same env marks).
			unmarked++
			continue
		}
		if diff := cmp.Diff(pa, pb); diff != "" {
			t.Fatalf("pair %d: the filter dropped an update that changes the decision (-old +new):\n%s\nold: %+v\nnew: %+v", i, diff, old, new)
		}
	}
	t.Logf("%d updates dropped (%d of unmarked pods), %d kept", dropped, unmarked, kept)
	if dropped < 2000 || kept < 2000 || unmarked < 200 {
		t.Fatalf("%d dropped (%d unmarked), %d kept: the random pairs do not exercise every side", dropped, unmarked, kept)
	}
}

// Unit rows: what the pod filter keeps and drops.
func TestPodUpdateMatters(t *testing.T) {
	base := podtest.Pod("p").Container("main").Container("log", podtest.Env(decision.EnvTerminate, "true")).
		Condition(corev1.PodReady, corev1.ConditionTrue).Build()
	base.ResourceVersion = "1"
	for _, tc := range []struct {
		name    string
		change  func(p *corev1.Pod)
		matters bool
	}{
		{"resourceVersion only", func(p *corev1.Pod) { p.ResourceVersion = "2" }, false},
		{"readiness flip", func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }, false},
		{"a condition the decision does not read added", func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue})
		}, false},
		{"our condition added", func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: decision.ConditionSidecarTerminated, Status: corev1.ConditionTrue})
		}, true},
		{"all containers restarting", func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.AllContainersRestarting, Status: corev1.ConditionTrue})
		}, true},
		{"main exits", func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}
		}, true},
		{"sidecar image swapped", func(p *corev1.Pod) { p.Spec.Containers[1].Image = "q:1" }, true},
		{"phase", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, true},
		{"deletion", func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }, true},
		{"annotation", func(p *corev1.Pod) { p.Annotations = map[string]string{decision.AnnotationCRRAttempts: "2"} }, true},
		{"uid", func(p *corev1.Pod) { p.UID = "other" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			new := base.DeepCopy()
			tc.change(new)
			if got := reconciler.PodUpdateMatters(base, new); got != tc.matters {
				t.Errorf("PodUpdateMatters = %v, want %v", got, tc.matters)
			}
			if base.Status.Conditions[0].Status != corev1.ConditionTrue || base.ResourceVersion != "1" {
				t.Fatal("the filter changed the cached pod")
			}
		})
	}
}

// Unit rows: what the CRR filter keeps and drops.
func TestCRRUpdateMatters(t *testing.T) {
	base := &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c", ResourceVersion: "1",
		Labels:            map[string]string{reconciler.LabelManagedBy: reconciler.ManagedByValue, reconciler.LabelPodUID: "u", reconciler.LabelAttempt: "1"},
		CreationTimestamp: metav1.NewTime(podtest.Epoch)},
		Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: "p", Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "log"}}},
	}
	for _, tc := range []struct {
		name    string
		change  func(c *kruisev1alpha1.ContainerRecreateRequest)
		matters bool
	}{
		{"resourceVersion only", func(c *kruisev1alpha1.ContainerRecreateRequest) { c.ResourceVersion = "2" }, false},
		{"a finalizer", func(c *kruisev1alpha1.ContainerRecreateRequest) { c.Finalizers = []string{"x"} }, false},
		{"creation time from another decode", func(c *kruisev1alpha1.ContainerRecreateRequest) {
			c.CreationTimestamp = metav1.NewTime(podtest.Epoch.In(time.FixedZone("x", 3600)))
		}, false},
		{"phase", func(c *kruisev1alpha1.ContainerRecreateRequest) {
			c.Status.Phase = kruisev1alpha1.ContainerRecreateRequestCompleted
		}, true},
		{"completion", func(c *kruisev1alpha1.ContainerRecreateRequest) { now := metav1.Now(); c.Status.CompletionTime = &now }, true},
		{"pod-uid label", func(c *kruisev1alpha1.ContainerRecreateRequest) { c.Labels[reconciler.LabelPodUID] = "v" }, true},
		{"attempt label", func(c *kruisev1alpha1.ContainerRecreateRequest) { c.Labels[reconciler.LabelAttempt] = "2" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			new := base.DeepCopy()
			tc.change(new)
			if got := reconciler.CRRUpdateMatters(base, new); got != tc.matters {
				t.Errorf("CRRUpdateMatters = %v, want %v", got, tc.matters)
			}
		})
	}
}

// An update between two versions the decision ignores outright (here both
// finished) is dropped only when they are the same pod: a pod replaced by
// another of the same name matters (the sync forgets the old one), even when
// neither is eligible.
func TestPodUpdateBetweenIgnoredVersionsMattersOnlyForAnotherPod(t *testing.T) {
	old := podtest.Pod("p").UID("uid-1").Phase(corev1.PodSucceeded).Container("main", exitedAt).Container("log", markCRR).Build()
	for _, tc := range []struct {
		name    string
		change  func(p *corev1.Pod)
		matters bool
	}{
		{"the same pod, annotated", func(p *corev1.Pod) { p.Annotations = map[string]string{"x": "y"} }, false},
		{"another pod of the same name", func(p *corev1.Pod) { p.UID = "uid-2" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			new := old.DeepCopy()
			tc.change(new)
			if decision.Eligible(old) || decision.Eligible(new) {
				t.Fatal("want two versions the decision ignores")
			}
			if got := reconciler.PodUpdateMatters(old, new); got != tc.matters {
				t.Errorf("PodUpdateMatters = %v, want %v", got, tc.matters)
			}
		})
	}
}

// A pod add or a CRR event queues the pod only when the decision does not
// ignore it outright; an add of nothing (a tombstone) always does, a CRR
// event for a pod not in the cache never.
func TestAddsAndCRREventsQueueOnlyPodsTheDecisionMayActOn(t *testing.T) {
	eligible := donePod("p", "normal", markCRR)
	finished := podtest.Pod("p").Phase(corev1.PodSucceeded).Container("main", exitedAt).Container("log", markCRR, exitedAt).Build()
	if decision.Eligible(finished) || !decision.Eligible(eligible) {
		t.Fatal("want one pod the decision ignores and one it does not")
	}
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		add, crr bool
	}{
		{"nil", nil, true, false},
		{"eligible", eligible, true, true},
		{"finished", finished, false, false},
	} {
		if got := reconciler.PodAddMatters(tc.pod); got != tc.add {
			t.Errorf("%s: PodAddMatters = %v, want %v", tc.name, got, tc.add)
		}
		if got := reconciler.CRREventMatters(tc.pod); got != tc.crr {
			t.Errorf("%s: CRREventMatters = %v, want %v", tc.name, got, tc.crr)
		}
	}
}
