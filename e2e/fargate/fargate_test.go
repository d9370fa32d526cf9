// Package fargate runs the controller on a node that models an EKS Fargate
// node: a real kubelet, labelled eks.amazonaws.com/compute-type=fargate,
// with kruise-manager in the cluster but no kruise-daemon (no DaemonSet
// runs on Fargate), and younger than the controller's daemon grace, as a
// Fargate node, made for its one pod, is for most Jobs. The local cluster
// runs one real node at a time, so the one node plays it. The controller
// must swap the sidecar at once, never making a ContainerRecreateRequest
// that nothing would execute. Needs root; see e2e/README.md.
//
//	go test ./e2e/fargate -count=1 -timeout 20m -v
package fargate

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster/clustertest"
	"github.com/sidecar-terminator/sidecar-terminator/images"
)

var nodeImages = schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1beta1", Resource: "nodeimages"}

const (
	ns            = "e2e-fargate"
	sidecar, main = "proxy", "main"
)

func TestFargateNodeYoungerThanTheDaemonGrace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	audit := t.TempDir() + "/audit.log"
	e := clustertest.Up(ctx, t, cluster.UpOptions{AuditLogPath: audit, Kruise: cluster.KruiseOptions{NoDaemon: true}})
	kube := e.Clients.Kube
	label := fmt.Sprintf(`{"metadata":{"labels":{%q:"fargate"}}}`, decision.LabelEKSComputeType)
	if _, err := kube.CoreV1().Nodes().Patch(ctx, e.Node.Name, types.MergePatchType, []byte(label), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The default --kruise-daemon-grace (5 minutes): the node is younger.
	if _, err := e.StartController(ctx, e.Bin); err != nil {
		t.Fatal(err)
	}
	if err := cases.CreateNamespace(ctx, kube, ns); err != nil {
		t.Fatal(err)
	}
	// Marked for both paths: where a daemon could serve the node, a CRR
	// would come first.
	js := cases.JobSpec{Name: "with-image", Namespace: ns, Containers: []cases.Container{cases.Main(main, 1, 0),
		cases.Sidecar(sidecar, "exit:0", true).With(cases.EnvWhenJobExitWithImage, images.QuickExit.Ref)}}
	run, err := cases.RunWatched(ctx, e.Clients, js.Build(), 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := cases.JobFinished(run.Job); got != batchv1.JobComplete {
		t.Fatalf("Job ended %q, want Complete:\n%s", got, run.Describe())
	}
	pod := run.OnlyPod(t)
	if age := nodeImageAge(ctx, t, e, pod); age >= reconciler.DefaultKruiseDaemonGrace {
		t.Fatalf("the node's NodeImage was %s old when the main exited: not younger than the grace, so the case tests nothing", age)
	}
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
	evs, err := cases.PodEvents(ctx, kube, ns, pod.Name, cases.ReasonSidecarTerminating)
	if err != nil || len(evs) != 1 || !strings.Contains(evs[0].Message, "swapped their image") {
		t.Fatalf("%s events %v (%v), want one saying the image was swapped", cases.ReasonSidecarTerminating, evs, err)
	}
	if s, ok := cases.ContainerState(pod, main); ok && s.State.Terminated != nil {
		// A figure for the report (whole seconds on both sides), not a bound.
		t.Logf("swap %s after the main's exit (event at %s, main finished at %s)", cluster.EventTime(evs[0]).Sub(s.State.Terminated.FinishedAt.Time),
			cluster.EventTime(evs[0]).UTC().Format(time.RFC3339), s.State.Terminated.FinishedAt.UTC().Format(time.RFC3339))
	}

	if err := cluster.FlushAudit(ctx, kube, audit, ns); err != nil {
		t.Fatal(err)
	}
	got, err := cluster.MutatingRequestsIn(audit, cluster.ControllerServiceAccountUser, ns)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"patch pods " + pod.Name + " 200"}; !slices.Equal(got, want) {
		t.Errorf("controller writes in %s: %q, want %q (never a ContainerRecreateRequest)", ns, got, want)
	}
	crrs, err := cluster.MutatingRequestsIn(audit, cluster.ControllerServiceAccountUser, "")
	if err == nil {
		for _, w := range crrs {
			if strings.Contains(w, "containerrecreaterequests") {
				t.Errorf("the audit log has a controller CRR write: %s", w)
			}
		}
	}
	out, err := exec.CommandContext(ctx, e.Bin, "explain", pod.Name, "-n", ns, "--kubeconfig", e.Kubeconfig).CombinedOutput()
	if err != nil {
		t.Fatalf("explain: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), string(decision.PlatformEKSFargate)) || !strings.Contains(string(out), decision.LabelEKSComputeType) {
		t.Errorf("explain does not name the platform and why:\n%s", out)
	}
	t.Logf("explain:\n%s", out)
}

// nodeImageAge is how old the node's NodeImage (kruise-manager makes it 30 s
// after the node is ready) was when the main exited; zero when there is
// none, which the daemon signal reads as unknown too.
func nodeImageAge(ctx context.Context, t *testing.T, e *clustertest.Env, pod *corev1.Pod) time.Duration {
	t.Helper()
	ni, err := e.Clients.Dynamic.Resource(nodeImages).Get(ctx, e.Node.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	s, _ := cases.ContainerState(pod, main)
	if s.State.Terminated == nil {
		t.Fatalf("main %+v not terminated", s)
	}
	return s.State.Terminated.FinishedAt.Sub(ni.GetCreationTimestamp().Time)
}
