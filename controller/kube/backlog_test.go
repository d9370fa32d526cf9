package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// backlogPod is a Job pod whose main has exited, at resourceVersion rv: the
// sidecar CRR-marked (normal node) or image-marked (virtual node).
func backlogPod(i int, rv string, sidecar ...podtest.Option) *corev1.Pod {
	node, mark := "node-1", podtest.Env(decision.EnvTerminate, "true")
	if i%2 == 1 {
		node, mark = "vk-1", podtest.Env(decision.EnvTerminateWithImage, quickExit)
	}
	p := jobPod(fmt.Sprintf("burst-%02d", i), append([]podtest.Option{mark}, sidecar...)...).
		UID(fmt.Sprintf("uid-%02d", i)).Node(node).Build()
	p.ResourceVersion = rv
	return p
}

// syncCounting runs one Sync (a stale write fails it; that is logged) and
// returns the mutating requests it sent.
func (f *fixture) syncCounting(name string) int {
	f.t.Helper()
	f.client.ClearActions()
	f.kruise.ClearActions()
	if _, err := f.rec.Sync(context.Background(), cache.ObjectName{Namespace: "default", Name: name}); err != nil {
		f.t.Logf("Sync %s: %v", name, err)
	}
	n := 0
	for _, a := range append(f.client.Actions(), f.kruise.Actions()...) {
		switch a.GetVerb() {
		case "get", "list", "watch":
		default:
			n++
		}
	}
	return n
}

// A burst whose mains finished together meets a long queue and a cache that
// lags the API server by more than the expectation timeout and the CRRs'
// deadline. Each pod is written once; every later sync, while the cache still
// shows the pods as they were (no CRR, the old image, the sidecar running)
// and after it catches up, writes nothing. Before, the sync past the
// expectation timeout sent the CRR create again (409) and the swap again
// (its test op failing, then again at every retry), and a CRR seen past its
// deadline beside a sidecar the cache still showed running got a second
// attempt (an annotate and a create).
func TestBacklogSendsOneWritePerPod(t *testing.T) {
	const n = 20
	var pods []*corev1.Pod
	for i := 0; i < n; i++ {
		pods = append(pods, backlogPod(i, "1"))
	}
	f := newFixture(t, pods, map[string]map[string]string{"node-1": {}, "vk-1": {"type": "virtual-kubelet"}})
	writes := map[string]int{}
	syncAll := func() {
		for _, p := range pods {
			writes[p.Name] += f.syncCounting(p.Name)
		}
	}
	syncAll()

	// The API server moves on: each sidecar stops (the CRR's, or the swapped
	// image's exit) and its pod's status is written. The cache shows none of it.
	ctx := context.Background()
	for _, p := range pods {
		live, err := f.client.CoreV1().Pods("default").Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		live.ResourceVersion = "2"
		live.Status.ContainerStatuses[1].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 0, FinishedAt: metav1.NewTime(f.clock.Now())}}
		if _, err := f.client.CoreV1().Pods("default").Update(ctx, live, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The queue is long: each pod comes round every 20 s, for four minutes.
	for step := 0; step < 12; step++ {
		f.clock.Step(20 * time.Second)
		syncAll()
		if step == 5 {
			// The CRR informer catches up before the pod informer does: the
			// CRRs are seen past their deadline beside sidecars the cache
			// still shows running.
			list, err := f.kruise.AppsV1alpha1().ContainerRecreateRequests("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range list.Items {
				crr := list.Items[i].DeepCopy()
				crr.CreationTimestamp = metav1.NewTime(podtest.Epoch.Add(11 * time.Second))
				crr.ResourceVersion = "1"
				if err := f.caches.CRRInformer.GetIndexer().Add(cacheCRR(crr)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// The pod informer catches up.
	for _, p := range pods {
		live, _ := f.client.CoreV1().Pods("default").Get(ctx, p.Name, metav1.GetOptions{})
		f.setPod(live)
	}
	f.clock.Step(time.Second)
	syncAll()

	for _, p := range pods {
		if writes[p.Name] != 1 {
			t.Errorf("%s: %d mutating requests, want exactly 1", p.Name, writes[p.Name])
		}
	}
	if got := counterValue(t, f.metrics, string(decision.ActionCreateCRR), reconciler.ResultAlreadyDone); got != 0 {
		t.Errorf("%v CRR creates met their own CRR, want 0", got)
	}
}

// A write refused as stale (the swap's test op failed: someone changed the
// sidecar's image at the API server) was decided on a view the API server
// has moved past. The sync does not send it again while the cache still
// shows that view (before: again at each retry, 5 ms doubling); once the
// cache shows the newer pod, it is decided on that.
func TestStaleWriteIsNotRepeatedFromTheSameView(t *testing.T) {
	cached := backlogPod(1, "1")
	f := newFixture(t, []*corev1.Pod{cached}, map[string]map[string]string{"vk-1": {"type": "virtual-kubelet"}})
	ctx := context.Background()
	live, _ := f.client.CoreV1().Pods("default").Get(ctx, cached.Name, metav1.GetOptions{})
	live.Spec.Containers[1].Image = "example.com/log:2"
	live.ResourceVersion = "2"
	if _, err := f.client.CoreV1().Pods("default").Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := f.syncCounting(cached.Name); got != 1 {
		t.Fatalf("first sync sent %d writes, want the one swap", got)
	}
	for i := 0; i < 5; i++ {
		f.clock.Step(time.Duration(5<<i) * time.Millisecond)
		if got := f.syncCounting(cached.Name); got != 0 {
			t.Fatalf("retry %d on the same stale view sent %d writes, want none", i+1, got)
		}
	}
	f.setPod(live)
	if got := f.syncCounting(cached.Name); got != 1 {
		t.Fatalf("on the newer view: %d writes, want the swap decided on it", got)
	}
	after, _ := f.client.CoreV1().Pods("default").Get(ctx, cached.Name, metav1.GetOptions{})
	if after.Spec.Containers[1].Image != quickExit {
		t.Errorf("sidecar image %q, want the quick-exit image", after.Spec.Containers[1].Image)
	}
}
