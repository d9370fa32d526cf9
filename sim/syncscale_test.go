package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

type nopRecorder struct{}

func (nopRecorder) Event(runtime.Object, string, string, string) {}

// BenchmarkSyncWithRunningPods shows the cost of one Sync as a function of
// how many running Job pods the reconciler remembers. It grows linearly:
// Reconciler.track and forget recount the pods-tracked gauge by scanning
// every remembered pod on every Sync, so a controller watching N pods does
// O(N) work per event and O(N^2) overall (half the CPU of a 30k-pod
// job-never-crr run, profiled).
func BenchmarkSyncWithRunningPods(b *testing.B) {
	for _, n := range []int{1000, 4000, 16000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			c := &Cache{pods: map[cache.ObjectName]*corev1.Pod{}, nodes: map[string]decision.NodeFacts{"node-1": {Name: "node-1"}}}
			keys := make([]cache.ObjectName, n)
			for i := range keys {
				pod := podtest.Pod(fmt.Sprintf("p%d", i)).Container("main").Container("other").Build()
				keys[i] = cache.ObjectName{Namespace: pod.Namespace, Name: pod.Name}
				c.pods[keys[i]] = pod
			}
			r := reconciler.New(reconciler.DefaultConfig(), c, podtest.NopWriter{}, reconciler.NoLiveReads{}, nopRecorder{}, nil, clocktesting.NewFakePassiveClock(Epoch))
			ctx := New(Scenario{}, 1, Options{}).ctx
			for _, k := range keys {
				if _, err := r.Sync(ctx, k); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := r.Sync(ctx, keys[i%n]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSyncStages is the reconciler's own cost of the syncs a pod gets
// in a burst, apart from the API (a map for the cache, writes that do
// nothing, no events): mains running, the mains' exit (a swap is planned and
// sent), and the pod finished. Each stage runs over 2,000 pods, each met by
// a reconciler that has not synced it yet, as in a burst.
func BenchmarkSyncStages(b *testing.B) {
	const n = 2000
	for _, stage := range []struct {
		name  string
		phase corev1.PodPhase
		main  podtest.Option
	}{
		{"MainsActive", corev1.PodRunning, podtest.Running()},
		{"Act", corev1.PodRunning, podtest.Exited(0, Epoch)},
		{"Ignored", corev1.PodSucceeded, podtest.Exited(0, Epoch)},
	} {
		b.Run(stage.name, func(b *testing.B) {
			// A virtual node: the sidecar's path is the image swap.
			c := &Cache{pods: map[cache.ObjectName]*corev1.Pod{}, nodes: map[string]decision.NodeFacts{"vk-1": {Name: "vk-1", Labels: map[string]string{"type": "virtual-kubelet"}}}}
			keys := make([]cache.ObjectName, n)
			for i := range keys {
				pod := podtest.Pod(fmt.Sprintf("p%d", i)).Node("vk-1").Phase(stage.phase).Container("main", stage.main).
					Container("sidecar", podtest.Running(), podtest.Env(decision.EnvTerminateWithImage, "ghcr.io/sidecar-terminator/quick-exit:1")).Build()
				keys[i] = cache.ObjectName{Namespace: pod.Namespace, Name: pod.Name}
				c.pods[keys[i]] = pod
			}
			clk := clocktesting.NewFakePassiveClock(Epoch.Add(time.Minute))
			ctx := New(Scenario{}, 1, Options{}).ctx
			var r *reconciler.Reconciler
			var metrics *reconciler.Metrics
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%n == 0 {
					b.StopTimer()
					metrics = reconciler.NewMetrics(nil)
					r = reconciler.New(reconciler.DefaultConfig(), c, podtest.NopWriter{}, reconciler.NoLiveReads{}, nopRecorder{}, metrics, clk)
					b.StartTimer()
				}
				if _, err := r.Sync(ctx, keys[i%n]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			// Each stage is what its name says (the last reconciler's syncs).
			if got := testutil.ToFloat64(metrics.Decisions.WithLabelValues(stage.name)); got == 0 {
				b.Fatalf("no %s decision among the syncs", stage.name)
			}
		})
	}
}
