package virtual

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestManyPodsOnVirtualNodes is opt-in (VIRTUAL_E2E_SCALE=N): one Job of N
// pods over the two virtual nodes, each stopped by one image swap. It shows
// the nodes carry pods by the thousand; `make test` does not run it.
func TestManyPodsOnVirtualNodes(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("VIRTUAL_E2E_SCALE"))
	if n <= 0 {
		t.Skip("set VIRTUAL_E2E_SCALE=N to run an N-pod Job on the virtual nodes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	ns := newNamespace(ctx, t, "scale")
	js := jobSpec{name: "scale", policy: corev1.RestartPolicyNever, parallelism: int32(n),
		main: mainFor(5, 0), sidecar: sidecarExit(0), sidecarEnv: []corev1.EnvVar{envImage}}
	t0 := time.Now()
	obs := runJob(ctx, t, ns, js, 25*time.Minute)
	elapsed := time.Since(t0)
	if got := jobFinished(obs.job); got != batchv1.JobComplete {
		t.Fatalf("job ended %q, want Complete", got)
	}
	pods := obs.pods()
	var want []string
	perNode := map[string]int{}
	for _, p := range pods {
		perNode[p.Spec.NodeName]++
		if p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s ended %s", p.Name, p.Status.Phase)
		}
		want = append(want, "patch pods "+p.Name+" 200")
	}
	got := controllerWrites(t, ns)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("controller writes: %d, want one patch per pod (%d)", len(got), len(want))
	}
	checkSwapOnlyAfterMainsDone(t, obs)
	t.Logf("%d pods (%v) Complete in %s: %.1f pods/s; %d pod versions watched",
		len(pods), perNode, elapsed.Round(time.Second), float64(len(pods))/elapsed.Seconds(), len(obs.versions))
	fmt.Fprintf(os.Stderr, "virtual: scale %d pods in %s\n", len(pods), elapsed.Round(time.Second))
}
