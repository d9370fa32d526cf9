package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// What the pod informer's handlers queue, on pods as the informer delivers
// them (trimmed and encoded, CachePod): a kubelet status heartbeat while the main runs (probe
// times, IPs, readiness, a resourceVersion) is dropped; a container's exit
// is not; a finished pod's later updates are dropped, and so is the add of a
// pod with no container status yet.
func TestPodHandlersDropWhatChangesNoDecision(t *testing.T) {
	trim := func(p *corev1.Pod) any {
		out, err := CachePod(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	running := jobPod("hb", podtest.Env(decision.EnvTerminate, "true")).Condition(corev1.PodReady, corev1.ConditionTrue).Build()
	running.ResourceVersion = "1"
	heartbeat := running.DeepCopy()
	heartbeat.ResourceVersion = "2"
	heartbeat.Status.PodIP = "10.0.0.7"
	heartbeat.Status.Conditions[0].LastProbeTime = metav1.NewTime(podtest.Epoch.Add(time.Minute))
	heartbeat.Status.Conditions[0].Status = corev1.ConditionFalse
	heartbeat.Status.ContainerStatuses[1].Ready = true
	heartbeat.Labels = map[string]string{"batch.kubernetes.io/job-name": "hb"}
	if podUpdateMatters(trim(running), trim(heartbeat), nil) {
		t.Error("a heartbeat (readiness, probe time, IP, a label, resourceVersion) was queued")
	}
	exited := heartbeat.DeepCopy()
	exited.ResourceVersion = "3"
	exited.Status.ContainerStatuses[1].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
	if !podUpdateMatters(trim(heartbeat), trim(exited), nil) {
		t.Error("a container's exit was dropped")
	}
	done := exited.DeepCopy()
	done.ResourceVersion, done.Status.Phase = "4", corev1.PodSucceeded
	if !podUpdateMatters(trim(exited), trim(done), nil) {
		t.Error("the pod's end was dropped: its sync forgets it")
	}
	deleting := done.DeepCopy()
	now := metav1.NewTime(podtest.Epoch)
	deleting.ResourceVersion, deleting.DeletionTimestamp = "5", &now
	if podUpdateMatters(trim(done), trim(deleting), nil) {
		t.Error("an update of a finished pod was queued")
	}
	created := podtest.Pod("new").Container("main", podtest.NoStatus()).Container("log", podtest.NoStatus(), podtest.Env(decision.EnvTerminate, "true")).Build()
	created.Status.Phase = corev1.PodPending
	if podAddMatters(trim(created)) {
		t.Error("the add of a pod with no container status was queued")
	}
	if !podAddMatters(trim(running)) {
		t.Error("the add of a running Job pod (the initial list) was dropped")
	}
}

// The handlers answer from what the cache knows of a pod without decoding
// it (decision.Considered) where they can: for every pair of versions, the
// answer is the reconciler's filter's on the pods as a cache read returns them.
func TestTheCachesFiltersAnswerAsTheReconcilers(t *testing.T) {
	versions := []*corev1.Pod{}
	for _, p := range cachedPodCases() {
		versions = append(versions, p)
	}
	created := jobPod("p").Build()
	created.Status.ContainerStatuses, created.Status.Phase = nil, corev1.PodPending
	running := jobPod("p", podtest.Env(decision.EnvTerminate, "true")).Build()
	running.UID = created.UID
	done := running.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	deleting := done.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: podtest.Epoch}
	replaced := created.DeepCopy()
	replaced.UID = "another"
	failed := replaced.DeepCopy()
	failed.Status.Phase = corev1.PodFailed
	// Unmarked, then marked by the annotation, then unmarked again.
	unmarked := jobPod("p").Build()
	unmarked.UID = created.UID
	annotated := unmarked.DeepCopy()
	annotated.Annotations = map[string]string{decision.AnnotationSidecars: "log"}
	unmarkedDone := unmarked.DeepCopy()
	unmarkedDone.Status.Phase = corev1.PodSucceeded
	versions = append(versions, created, running, done, deleting, replaced, failed, unmarked, annotated, unmarkedDone)
	rec := reconciler.New(reconciler.DefaultConfig(), nil, nil, reconciler.NoLiveReads{}, record.NewFakeRecorder(10), nil,
		clocktesting.NewFakeClock(podtest.Epoch))
	considered := 0
	for i, a := range versions {
		ca, err := CachePod(a.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		ra, _ := AsCached(a.DeepCopy())
		if got, want := podAddMatters(ca), reconciler.PodAddMatters(ra); got != want {
			t.Errorf("version %d (%s): add matters %v, the reconciler's filter says %v", i, a.Name, got, want)
		}
		if got, want := ca.(*cachedPod).considered, reconciler.CRREventMatters(ra); got != want {
			t.Errorf("version %d (%s): a CRR event matters %v, the reconciler's filter says %v", i, a.Name, got, want)
		}
		if ca.(*cachedPod).considered {
			considered++
		}
		for j, b := range versions {
			cb, _ := CachePod(b.DeepCopy())
			rb, _ := AsCached(b.DeepCopy())
			if got, want := podUpdateMatters(ca, cb, nil), reconciler.PodUpdateMatters(ra, rb); got != want {
				t.Errorf("versions %d→%d (%s→%s): update matters %v, the reconciler's filter says %v", i, j, a.Name, b.Name, got, want)
			}
			// With an echo filter the cache asks only its view comparison;
			// a reconciler with no write noted answers as its whole filter.
			if got, want := podUpdateMatters(ca, cb, rec), rec.PodUpdateMatters(ra, rb); got != want {
				t.Errorf("versions %d→%d (%s→%s): update matters %v with the echo filter, the reconciler's says %v", i, j, a.Name, b.Name, got, want)
			}
		}
	}
	if considered == 0 || considered == len(versions) {
		t.Fatalf("%d of %d versions considered: the cases test nothing", considered, len(versions))
	}
}

// A Job pod with no sidecar marked is never queued for its own events: its
// decision is NoSidecars whatever its status. The update that marks it is.
func TestAnUnmarkedJobPodIsNotQueuedUntilItIsMarked(t *testing.T) {
	running := jobPod("plain").Build()
	done := running.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	marked := running.DeepCopy()
	marked.Annotations = map[string]string{decision.AnnotationSidecars: "log"}
	cache := func(p *corev1.Pod) any {
		c, err := CachePod(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if podAddMatters(cache(running)) {
		t.Error("the add of an unmarked Job pod was queued")
	}
	if podUpdateMatters(cache(running), cache(done), nil) {
		t.Error("the end of an unmarked Job pod was queued")
	}
	if !podUpdateMatters(cache(running), cache(marked), nil) {
		t.Error("the update that marks a sidecar by annotation was dropped")
	}
}

// BenchmarkPodHandlersUpdateFilter is what the pod handler's update filter
// costs an update of a pod the decision considers that changes nothing it
// reads (a heartbeat): both versions decoded and compared.
func BenchmarkPodHandlersUpdateFilter(b *testing.B) {
	old := kubeletJobPod(1)
	heartbeat := old.DeepCopy()
	heartbeat.ResourceVersion += "1"
	heartbeat.Status.PodIP = "10.0.0.9"
	o, err := CachePod(old)
	if err != nil {
		b.Fatal(err)
	}
	n, err := CachePod(heartbeat)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if podUpdateMatters(o, n, nil) {
			b.Fatal("a heartbeat queued")
		}
	}
}
