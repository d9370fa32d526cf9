package virtual

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/images"
	"github.com/sidecar-terminator/sidecar-terminator/images/oci"
)

// realNodeUnavailable says why this host cannot add a real node, or "".
func realNodeUnavailable() string {
	if os.Geteuid() != 0 {
		return "a real node needs root (kubelet, containerd, cgroups, network namespaces)"
	}
	for _, bin := range []string{"containerd", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " is not installed (e2e/hack/install-host-deps.sh)"
		}
	}
	return ""
}

// TestMixedJobOverRealAndVirtualNodes: one Job of 20 pods spread over a real
// node (kubelet + containerd + kruise-daemon) and the two virtual nodes. The
// same pod template marks its sidecar for both paths; the controller must
// pick per node: one CRR per real-node pod, one image patch per
// virtual-node pod, and nothing else, as the audit log counts them.
func TestMixedJobOverRealAndVirtualNodes(t *testing.T) {
	if why := realNodeUnavailable(); why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip("SKIPPED, NOT PASSED: " + why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	real := startRealNode(ctx, t)

	hosts := append([]string{real.Name}, virtualNodes...)
	js := cases.VirtualJob("mixed", corev1.RestartPolicyNever, cases.Main(cases.VirtualMain, 3, 0),
		cases.Sidecar(cases.VirtualSidecar, "exit:0", true).With(cases.EnvWhenJobExitWithImage, images.QuickExit.Ref))
	js.Parallelism = 20
	newNamespace(ctx, t, js.Namespace)
	job := cases.OnVirtualNode(js.Build())
	spreadOver(&job.Spec.Template.Spec, js.Name, hosts)
	run, err := cases.RunWatched(ctx, suite.clients, job, 4*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := cases.JobFinished(run.Job); got != batchv1.JobComplete {
		t.Fatalf("job ended %q, want Complete\n%s", got, run.Describe())
	}

	perNode := map[string]int{}
	var want []string
	for _, p := range run.Pods() {
		perNode[p.Spec.NodeName]++
		if p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s on %s ended %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
		if p.Spec.NodeName == real.Name {
			want = append(want, "create containerrecreaterequests "+decision.CRRName(p, 1)+" 201")
			if img := cases.ContainerImage(p, cases.VirtualSidecar); img != images.Workload.Ref {
				t.Errorf("real-node pod %s: sidecar image %s, want it untouched (CRR path)", p.Name, img)
			}
		} else {
			want = append(want, "patch pods "+p.Name+" 200")
		}
	}
	t.Logf("pods per node: %v", perNode)
	for _, h := range hosts {
		if perNode[h] == 0 {
			t.Errorf("no pod ran on %s: the spread did not cover every node (%v)", h, perNode)
		}
	}
	if len(run.Pods()) != 20 {
		t.Errorf("saw %d pods, want 20 (a failed pod was replaced?)\n%s", len(run.Pods()), run.Describe())
	}
	got := controllerWrites(t, js.Namespace)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("controller writes (%d):\n %q\nwant (%d):\n %q", len(got), got, len(want), want)
	}
	run.CheckSwapOnlyAfterMainDone(t, cases.VirtualSidecar, images.QuickExit.Ref, cases.VirtualMain, 0)
}

// startRealNode adds a kubelet + containerd node and OpenKruise's manager
// and daemon to the suite's control plane, and stops the node (restoring
// the host) when the test ends.
func startRealNode(ctx context.Context, t *testing.T) *cluster.Node {
	t.Helper()
	t0 := time.Now()
	tars, err := oci.WriteAll(ctx, filepath.Join(suite.cp.RunDir, "images"))
	if err != nil {
		t.Fatal(err)
	}
	node, err := cluster.StartNode(ctx, suite.cp, cluster.NodeOptions{Images: tars})
	if err != nil {
		t.Fatalf("start real node: %v", err)
	}
	t.Cleanup(func() {
		if err := node.Stop(); err != nil {
			t.Errorf("stop real node (something may be left behind): %v", err)
		}
	})
	if err := cluster.StartKruise(ctx, suite.cp, node); err != nil {
		t.Fatalf("start OpenKruise: %v", err)
	}
	t.Logf("real node %s and OpenKruise ready in %s", node.Name, time.Since(t0).Round(time.Millisecond))
	return node
}

// spreadOver lets the pods run on the given nodes only, evenly: a required
// node affinity on the hostname and a hostname topology spread over the
// pods labelled case=caseLabel. The virtual nodes' nodeSelector is dropped
// so the real node qualifies; their toleration stays.
func spreadOver(ps *corev1.PodSpec, caseLabel string, hosts []string) {
	ps.NodeSelector = nil
	ps.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: hosts}},
		}}},
	}}
	ps.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"case": caseLabel}},
	}}
	// The real node has the images imported and must not try to pull.
	for i := range ps.Containers {
		ps.Containers[i].ImagePullPolicy = corev1.PullNever
	}
}
