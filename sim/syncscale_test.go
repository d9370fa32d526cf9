package sim

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

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
			c := &Cache{pods: map[cache.ObjectName]*corev1.Pod{}, nodes: map[string]map[string]string{"node-1": {}}}
			keys := make([]cache.ObjectName, n)
			for i := range keys {
				pod := podtest.Pod(fmt.Sprintf("p%d", i)).Container("main").Container("other").Build()
				keys[i] = cache.ObjectName{Namespace: pod.Namespace, Name: pod.Name}
				c.pods[keys[i]] = pod
			}
			r := reconciler.New(reconciler.DefaultConfig(), c, podtest.NopWriter{}, nopRecorder{}, nil, clocktesting.NewFakePassiveClock(Epoch))
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
