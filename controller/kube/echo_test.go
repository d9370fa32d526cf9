package kube

import (
	"context"
	"sync"
	"testing"
	"time"

	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// countingReconciler is the real reconciler, its syncs counted.
type countingReconciler struct {
	*reconciler.Reconciler
	mu    sync.Mutex
	syncs int
}

func (c *countingReconciler) Sync(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	c.mu.Lock()
	c.syncs++
	c.mu.Unlock()
	return c.Reconciler.Sync(ctx, key)
}

func (c *countingReconciler) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.syncs
}

// A pod of a burst is synced twice, end to end through the informers: when
// it starts (its mains run) and when its mains are done (the one write).
// The echo of that write (the swapped image on a virtual node, the CRR's add
// on a normal one) and the pod's own end (Succeeded) are not queued: their
// syncs would find nothing to do, and the pod is forgotten at its end.
func TestABurstPodIsSyncedOnlyWhenItStartsAndWhenItsMainsAreDone(t *testing.T) {
	for name, tc := range map[string]struct {
		node   map[string]string
		mark   podtest.Option
		echoes string // the informer event the write comes back as
	}{
		"crr on a normal node":   {map[string]string{"kubernetes.io/hostname": "node-1"}, podtest.Env(decision.EnvTerminate, "true"), "crr add"},
		"swap on a virtual node": {map[string]string{"type": "virtual-kubelet"}, podtest.Env(decision.EnvTerminateWithImage, quickExit), "pod update"},
	} {
		t.Run(name, func(t *testing.T) {
			running := podtest.Pod("job-e").Namespace("default").UID("uid-e").Node("node-1").Phase(corev1.PodRunning).
				Container("main").Container("log", tc.mark).Build()
			client := fake.NewClientset(running)
			kruise := kruisefake.NewSimpleClientset()
			scheme := runtime.NewScheme()
			metav1.AddMetaToScheme(scheme)
			caches, err := NewCaches(client, metadatafake.NewSimpleMetadataClient(scheme), kruise, true)
			if err != nil {
				t.Fatal(err)
			}
			metrics := reconciler.NewMetrics(nil)
			clk := clocktesting.NewFakeClock(podtest.Epoch.Add(11 * time.Second))
			rec := &countingReconciler{Reconciler: reconciler.New(reconciler.DefaultConfig(), caches,
				Writer{Client: client, Kruise: kruise}, Writer{Client: client, Kruise: kruise}, record.NewFakeRecorder(100), metrics, clk)}
			ctrl, err := NewController(caches, rec)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			caches.Start(ctx.Done())
			if !cache.WaitForCacheSync(ctx.Done(), caches.Synced()...) {
				t.Fatal("caches did not sync")
			}
			// The node cache lists no node from the fake metadata client; the
			// node is given to it once it has synced.
			caches.NodeInformer.GetIndexer().Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: tc.node}})
			ran := make(chan error, 1)
			go func() { ran <- ctrl.Run(ctx, 2) }()
			events := func(kind, event, result string) int {
				return int(testutil.ToFloat64(ctrl.events.vec.WithLabelValues(kind, event, result)))
			}
			eventually(t, "the running pod synced", func() bool { return rec.count() == 1 })

			exited := running.DeepCopy()
			exited.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: metav1.NewTime(podtest.Epoch), FinishedAt: metav1.NewTime(podtest.Epoch.Add(10 * time.Second))}}
			if _, err := client.CoreV1().Pods("default").UpdateStatus(ctx, exited, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			// The write and its echo: the CRR's add, or the pod's update.
			if tc.echoes == "crr add" {
				eventually(t, "the CRR's add handled", func() bool { return events("crr", "add", "filtered")+events("crr", "add", "queued") == 1 })
			} else {
				eventually(t, "the swap's update handled", func() bool {
					return events("pod", "update", "filtered")+events("pod", "update", "queued") == 2
				})
			}

			// The sidecar exits and the pod Succeeds, as the node would.
			live, err := client.CoreV1().Pods("default").Get(ctx, "job-e", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			done := live.DeepCopy()
			done.Status.Phase = corev1.PodSucceeded
			done.Status.ContainerStatuses[1].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
			if _, err := client.CoreV1().Pods("default").UpdateStatus(ctx, done, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			updates := 2
			if tc.echoes == "pod update" {
				updates = 3
			}
			eventually(t, "the pod's end handled", func() bool {
				return events("pod", "update", "filtered")+events("pod", "update", "queued") == updates
			})
			eventually(t, "the queue empty", func() bool { return ctrl.Queued() == 0 })

			if got := events("pod", "update", "queued"); got != 1 {
				t.Errorf("pod updates queued: %d, want 1 (the mains' exit; not the echo, not the pod's end)", got)
			}
			if got := events("crr", "add", "queued"); got != 0 {
				t.Errorf("CRR adds queued: %d, want 0 (the add of our own CRR)", got)
			}
			if got := rec.count(); got != 2 {
				t.Errorf("syncs: %d, want 2 (the pod's start and its mains' exit)", got)
			}
			if got := testutil.ToFloat64(metrics.PodsTracked); got != 0 {
				t.Errorf("pods tracked after the pod's end: %v, want 0 (forgotten)", got)
			}
			cancel()
			if err := <-ran; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}
