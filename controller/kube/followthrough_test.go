package kube

import (
	"context"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// Issue 15 item 4: the kubelet wrote its phase (Running) back over a settled
// pod, which keeps our condition. The re-settle replaces the condition (one
// of its type, never two) with a new transition time, so the grace wait
// starts again instead of reading the first settle's time.
func TestReSettleReplacesTheConditionAndRestartsTheGraceWait(t *testing.T) {
	first := podtest.Epoch.Add(-time.Hour)
	pod := jobPod("job-s", podtest.Env(decision.EnvTerminate, "true"), podtest.Env(decision.EnvIgnoreExitCode, "true")).
		Condition(corev1.PodReady, corev1.ConditionFalse).
		ConditionAt(decision.ConditionSidecarTerminated, corev1.ConditionTrue, first).Build()
	f := newFixture(t, []*corev1.Pod{pod}, normalNode)
	writes := f.sync("job-s")
	if len(writes) != 2 || writes[0].GetSubresource() != "status" {
		t.Fatalf("want a re-settle (status patch and annotation), got %v", writes)
	}
	server, _ := f.client.CoreV1().Pods("default").Get(context.Background(), "job-s", metav1.GetOptions{})
	var ours []corev1.PodCondition
	for _, c := range server.Status.Conditions {
		if c.Type == decision.ConditionSidecarTerminated {
			ours = append(ours, c)
		}
	}
	if len(ours) != 1 || len(server.Status.Conditions) != 2 {
		t.Fatalf("conditions after the re-settle: %+v; want one %s", server.Status.Conditions, decision.ConditionSidecarTerminated)
	}
	if !ours[0].LastTransitionTime.Time.Equal(f.clock.Now().Truncate(time.Second)) {
		t.Fatalf("condition transition time %s, want the re-settle's %s", ours[0].LastTransitionTime, f.clock.Now())
	}
	// Within the grace period counted from the re-settle: no kill, though the
	// first settle's grace ended long ago.
	f.setPod(server)
	f.clock.Step(20 * time.Second)
	if writes := f.sync("job-s"); len(writes) != 0 {
		t.Fatalf("sync within the grace period of the re-settle wrote %v", writes)
	}
}

// Issue 15 item 5: a pod with a long grace period gets a CRR whose deadline
// covers it, and whose strategy carries the same grace period; the decision
// waits for that deadline before it calls the kill failed.
func TestCRRDeadlineCoversThePodsGracePeriod(t *testing.T) {
	grace := int64(120)
	pod := jobPod("job-g", podtest.Env(decision.EnvTerminate, "true"), podtest.Env(decision.EnvTerminateWithImage, quickExit)).Build()
	pod.Spec.TerminationGracePeriodSeconds = &grace
	f := newFixture(t, []*corev1.Pod{pod}, normalNode)
	writes := f.sync("job-g")
	if len(writes) != 1 || writes[0].GetVerb() != "create" {
		t.Fatalf("want one CRR, got %v", writes)
	}
	crr := writes[0].(k8stesting.CreateAction).GetObject().(*kruisev1alpha1.ContainerRecreateRequest)
	if d := *crr.Spec.ActiveDeadlineSeconds; d < grace+10 {
		t.Fatalf("activeDeadlineSeconds %d does not cover the grace period %d plus a margin", d, grace)
	}
	if g := crr.Spec.Strategy.TerminationGracePeriodSeconds; g == nil || *g != grace {
		t.Fatalf("strategy.terminationGracePeriodSeconds %v, want %d", g, grace)
	}
	created, _ := f.kruise.AppsV1alpha1().ContainerRecreateRequests("default").Get(context.Background(), crr.Name, metav1.GetOptions{})
	created.CreationTimestamp = metav1.NewTime(f.clock.Now())
	created.Status.Phase = kruisev1alpha1.ContainerRecreateRequestRecreating
	f.caches.CRRInformer.GetIndexer().Add(cacheCRR(created))
	// 90 s in, past the default 60 s deadline: the sidecar is still draining
	// under its 120 s grace period, so neither a swap nor a second CRR.
	f.clock.Step(90 * time.Second)
	if writes := f.sync("job-g"); len(writes) != 0 {
		t.Fatalf("sync during the sidecar's grace period wrote %v", writes)
	}
	// Past the CRR's stop window (its deadline, 150 s, plus the grace period
	// and a margin: kruise's completion, which would show whether
	// kruise-daemon began a stop, never came): the kill failed; the image
	// swap follows.
	f.clock.Step(decision.StopWindow(pod, decision.DefaultPolicy()) - 90*time.Second)
	writes = f.sync("job-g")
	if len(writes) != 1 || writes[0].GetVerb() != "patch" {
		t.Fatalf("want the swap once the deadline passed, got %v", writes)
	}
}
