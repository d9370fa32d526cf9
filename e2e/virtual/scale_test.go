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

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
	"github.com/sidecar-terminator/sidecar-terminator/images"
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
	js := cases.VirtualJob("scale", corev1.RestartPolicyNever, cases.Main(cases.VirtualMain, 5, 0),
		cases.Sidecar(cases.VirtualSidecar, "exit:0", false).With(cases.EnvWhenJobExitWithImage, images.QuickExit.Ref))
	js.Parallelism = int32(n)
	newNamespace(ctx, t, js.Namespace)
	t0 := time.Now()
	run, err := cases.RunWatched(ctx, suite.clients, cases.OnVirtualNode(js.Build()), 25*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(t0)
	if got := cases.JobFinished(run.Job); got != batchv1.JobComplete {
		t.Fatalf("job ended %q, want Complete", got)
	}
	pods := run.Pods()
	var want []string
	perNode := map[string]int{}
	for _, p := range pods {
		perNode[p.Spec.NodeName]++
		if p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s ended %s", p.Name, p.Status.Phase)
		}
		want = append(want, "patch pods "+p.Name+" 200")
	}
	got := controllerWrites(t, js.Namespace)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("controller writes: %d, want one patch per pod (%d)", len(got), len(want))
	}
	run.CheckSwapOnlyAfterMainDone(t, cases.VirtualSidecar, images.QuickExit.Ref, cases.VirtualMain, 0)
	t.Logf("%d pods (%v) Complete in %s: %.1f pods/s; %d pod versions watched",
		len(pods), perNode, elapsed.Round(time.Second), float64(len(pods))/elapsed.Seconds(), len(run.Versions()))
	fmt.Fprintf(os.Stderr, "virtual: scale %d pods in %s\n", len(pods), elapsed.Round(time.Second))
}
