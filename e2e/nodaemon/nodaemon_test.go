// Package nodaemon runs the controller on the local real cluster with
// kruise-manager but no kruise-daemon: the node is one the daemon does not
// serve (a pool its DaemonSet excludes, a Fargate node). Once the node's
// NodeImage is older than --kruise-daemon-grace with no status written by a
// daemon, the controller treats the node like a virtual one: a sidecar with
// a quick-exit image is swapped, one without gets NoTerminationPath at
// once, and neither gets a ContainerRecreateRequest (which nothing would
// execute). Needs root; see e2e/README.md.
//
//	go test ./e2e/nodaemon -count=1 -timeout 20m -v
package nodaemon

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster/clustertest"
	"github.com/sidecar-terminator/sidecar-terminator/images"
)

// grace is the controller's --kruise-daemon-grace here: short, so that the
// suite waits seconds rather than the default 5 minutes for the node to
// show as daemon-less. Its value does not matter otherwise: no daemon runs.
const grace = 15 * time.Second

var nodeImages = schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1beta1", Resource: "nodeimages"}

const (
	swapNS, warnNS = "e2e-nodaemon-swap", "e2e-nodaemon-warn"
	sidecar, main  = "proxy", "main"
)

func TestNodeWithoutKruiseDaemon(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	audit := filepath.Join(t.TempDir(), "audit.log")
	e := clustertest.Up(ctx, t, cluster.UpOptions{AuditLogPath: audit, Kruise: cluster.KruiseOptions{NoDaemon: true}})
	cl, kube := e.Clients, e.Clients.Kube
	if _, err := e.StartController(ctx, e.Bin, fmt.Sprintf("--kruise-daemon-grace=%s", grace)); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{swapNS, warnNS} {
		if err := cases.CreateNamespace(ctx, kube, ns); err != nil {
			t.Fatal(err)
		}
	}
	waitUntilDaemonless(ctx, t, e)

	// Both Jobs at once: the swap one in the background.
	type result struct {
		run *cases.WatchedRun
		err error
	}
	swapped := make(chan result, 1)
	go func() {
		// Marked for both paths: on a node a daemon serves, a CRR would come first.
		js := cases.JobSpec{Name: "with-image", Namespace: swapNS, Containers: []cases.Container{cases.Main(main, 1, 0),
			cases.Sidecar(sidecar, "exit:0", true).With(cases.EnvWhenJobExitWithImage, images.QuickExit.Ref)}}
		run, err := cases.RunWatched(ctx, cl, js.Build(), 3*time.Minute)
		swapped <- result{run, err}
	}()
	warned := noPathWarning(ctx, t, e)
	r := <-swapped
	if r.err != nil {
		t.Fatal(r.err)
	}
	checkSwap(ctx, t, kube, r.run)

	if err := cluster.FlushAudit(ctx, e.Clients.Kube, audit, warnNS); err != nil {
		t.Fatal(err)
	}
	for ns, want := range map[string][]string{swapNS: {"patch pods " + r.run.OnlyPod(t).Name + " 200"}, warnNS: nil} {
		got, err := cluster.MutatingRequestsIn(audit, cluster.ControllerServiceAccountUser, ns)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("controller writes in %s: %q, want %q (never a ContainerRecreateRequest)", ns, got, want)
		}
	}
	if crrs, err := cases.CRRsForPod(ctx, cl.Dynamic, warnNS, warned.Name); err != nil || len(crrs) > 0 {
		t.Errorf("CRRs for %s: %d (%v), want none", warned.Name, len(crrs), err)
	}
}

// waitUntilDaemonless waits until the node's NodeImage, which kruise-manager
// makes for it, is older than the grace; it must carry no status write by
// kruise-daemon (none runs).
func waitUntilDaemonless(ctx context.Context, t *testing.T, e *clustertest.Env) {
	t.Helper()
	var created time.Time
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		ni, err := e.Clients.Dynamic.Resource(nodeImages).Get(ctx, e.Node.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, f := range ni.GetManagedFields() {
			if f.Manager == "kruise-daemon" {
				return false, fmt.Errorf("NodeImage %s was written by kruise-daemon (%s %s), which should not run", ni.GetName(), f.Operation, f.Subresource)
			}
		}
		created = ni.GetCreationTimestamp().Time
		return true, nil
	})
	if err != nil {
		t.Fatalf("NodeImage of node %s: %v", e.Node.Name, err)
	}
	// creationTimestamp has whole seconds, rounded down: the controller,
	// reading the same field on this machine's clock, sees the node
	// daemon-less no later than this.
	wait := time.Until(created.Add(grace))
	t.Logf("NodeImage %s created %s; waiting %s for the controller's %s grace", e.Node.Name, created.Format(time.RFC3339), wait.Round(time.Millisecond), grace)
	select {
	case <-time.After(wait):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
}

// checkSwap: the Job completed through the image swap, made only after the
// main was done, with its event, and no CRR was ever seen.
func checkSwap(ctx context.Context, t *testing.T, kube kubernetes.Interface, run *cases.WatchedRun) {
	t.Helper()
	if got := cases.JobFinished(run.Job); got != batchv1.JobComplete {
		t.Fatalf("Job ended %q, want Complete:\n%s", got, run.Describe())
	}
	pod := run.OnlyPod(t)
	if img := cases.ContainerImage(pod, sidecar); img != images.QuickExit.Ref {
		t.Errorf("sidecar image %s, want the quick-exit image %s", img, images.QuickExit.Ref)
	}
	run.CheckSwapOnlyAfterMainDone(t, sidecar, images.QuickExit.Ref, main, 0)
	if len(run.CRRs) > 0 {
		t.Errorf("CRRs seen while the Job ran: %v", run.CRRs)
	}
	if err := cases.WaitForPodEvent(ctx, kube, pod, corev1.EventTypeNormal, cases.ReasonSidecarTerminating, time.Minute); err != nil {
		t.Fatal(err)
	}
	evs, err := cases.PodEvents(ctx, kube, pod.Namespace, pod.Name, cases.ReasonSidecarTerminating)
	if err != nil || len(evs) != 1 || !strings.Contains(evs[0].Message, "swapped their image for the quick-exit image") {
		t.Errorf("%s events %v (%v), want one saying the image was swapped", cases.ReasonSidecarTerminating, evs, err)
	}
}

// noPathWarning runs a Job whose sidecar is marked for a CRR only (no image,
// no operator default): once the main exits, a NoTerminationPath Warning
// naming the missing daemon, the sidecar left running, explain telling why;
// then the Job is deleted. It returns the pod.
func noPathWarning(ctx context.Context, t *testing.T, e *clustertest.Env) *corev1.Pod {
	t.Helper()
	kube := e.Clients.Kube
	js := cases.JobSpec{Name: "crr-only", Namespace: warnNS, Containers: []cases.Container{cases.Main(main, 1, 0), cases.Sidecar(sidecar, "exit:0", true)}}
	if _, err := kube.BatchV1().Jobs(warnNS).Create(ctx, js.Build(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().Pods(warnNS).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			return false, err
		}
		pod = &list.Items[0]
		_, done := cases.ExitCode(pod, main)
		return done, nil
	})
	if err != nil {
		t.Fatalf("waiting for the main to exit: %v", err)
	}
	if err := cases.WaitForPodEvent(ctx, kube, pod, corev1.EventTypeWarning, cases.ReasonNoTerminationPath, time.Minute); err != nil {
		t.Fatal(err)
	}
	evs, err := cases.PodEvents(ctx, kube, warnNS, pod.Name, cases.ReasonNoTerminationPath)
	if err != nil || len(evs) == 0 || !strings.Contains(evs[0].Message, "no kruise-daemon runs") {
		t.Errorf("%s events %v (%v), want one naming the missing kruise-daemon", decision.ReasonNoTerminationPath, evs, err)
	} else if s, ok := cases.ContainerState(pod, main); ok && s.State.Terminated != nil {
		// A figure for the report, not a pass/fail bound.
		t.Logf("NoTerminationPath %s after the main's exit (no CRR deadline waited)", cluster.EventTime(evs[0]).Sub(s.State.Terminated.FinishedAt.Time).Round(time.Second))
	}
	explain(ctx, t, e, pod)

	pod, err = kube.CoreV1().Pods(warnNS).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := cases.ContainerState(pod, sidecar); !ok || s.State.Running == nil || cases.ContainerImage(pod, sidecar) != images.Workload.Ref {
		t.Errorf("sidecar %+v, image %s: want it running, untouched", s, cases.ContainerImage(pod, sidecar))
	}
	// Clean up: the sidecar exits on the kubelet's SIGTERM.
	bg := metav1.DeletePropagationBackground
	if err := kube.BatchV1().Jobs(warnNS).Delete(ctx, js.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Pods(warnNS).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("pod %s not gone after its Job was deleted: %v", pod.Name, err)
	}
	return pod
}

// explain, run as an operator would, says the node runs no kruise-daemon
// and why.
func explain(ctx context.Context, t *testing.T, e *clustertest.Env, pod *corev1.Pod) {
	t.Helper()
	out, err := exec.CommandContext(ctx, e.Bin, "explain", pod.Name, "-n", pod.Namespace, "--kubeconfig", e.Kubeconfig,
		fmt.Sprintf("--kruise-daemon-grace=%s", grace)).CombinedOutput()
	if err != nil {
		t.Fatalf("explain: %v\n%s", err, out)
	}
	for _, want := range []string{"runs no kruise-daemon", "kruise-daemon never wrote the node's NodeImage", decision.ReasonNoTerminationPath} {
		if !strings.Contains(string(out), want) {
			t.Errorf("explain does not say %q:\n%s", want, out)
		}
	}
}
