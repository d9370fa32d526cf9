// Package nokruise runs the controller on the local real cluster without
// OpenKruise (no CRDs, no kruise-manager, no kruise-daemon) and with the
// operator's default quick-exit image: a sidecar marked only with
// OpenKruise's plain env, which names no image, is still stopped, by an
// image swap on the normal node. Needs root; see e2e/README.md.
//
//	go test ./e2e/nokruise -count=1 -timeout 20m -v
package nokruise

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster/clustertest"
	"github.com/sidecar-terminator/sidecar-terminator/images"
)

func TestDefaultQuickExitImageWithoutOpenKruise(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	e := clustertest.Up(ctx, t, cluster.UpOptions{NoKruise: true})
	ctl, err := e.StartController(ctx, e.Bin, "--default-quick-exit-image="+images.QuickExit.Ref)
	if err != nil {
		t.Fatal(err)
	}
	cl, kube := e.Clients, e.Clients.Kube
	js := cases.JobSpec{Name: "plain-env", Namespace: "e2e-no-kruise", RestartPolicy: corev1.RestartPolicyNever,
		Containers: []cases.Container{cases.Main("main", 2, 0), cases.Sidecar("proxy", "exit:0", true)}}
	if err := cases.CreateNamespace(ctx, kube, js.Namespace); err != nil {
		t.Fatal(err)
	}
	run, err := cases.RunWatched(ctx, cl, js.Build(), 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := cases.JobFinished(run.Job); got != batchv1.JobComplete {
		t.Fatalf("Job ended %q, want Complete:\n%s", got, run.Describe())
	}
	pod := run.OnlyPod(t)
	if img := cases.ContainerImage(pod, "proxy"); img != images.QuickExit.Ref {
		t.Errorf("sidecar image %s, want the default quick-exit image %s", img, images.QuickExit.Ref)
	}
	run.CheckSwapOnlyAfterMainDone(t, "proxy", images.QuickExit.Ref, "main", 0)
	if err := cases.WaitForPodEvent(ctx, kube, pod, corev1.EventTypeNormal, cases.ReasonSidecarTerminating, time.Minute); err != nil {
		t.Error(err)
	}
	logs, err := os.ReadFile(ctl.Process.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), "ContainerRecreateRequest API not served") {
		t.Errorf("the controller did not log that the CRR API is not served")
	}
}
