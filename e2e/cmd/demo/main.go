// Command demo shows both of the controller's paths: it brings the local
// cluster up with a mock virtual node beside the real one, runs a batch/v1
// Job whose pod has a main container and a marked sidecar on the real node
// and prints a timeline (main exits, the controller creates a CRR,
// kruise-daemon stops the sidecar, the Job completes), runs the same Job on
// the virtual node (the controller swaps the sidecar's image for the
// quick-exit image, the node restarts it, it exits 0), then runs it with the
// controller stopped and shows it stuck Running, and tears everything down.
//
// The virtual node is the project's mock provider (e2e/virtualnode), which
// runs no process: its containers start, restart on an image change and exit
// by the project's container model (sim/model). No public virtual-kubelet
// provider restarts a container on an image change (e2e/virtualnode's
// README), so the swap shown there is the controller's half only; the demo
// says so when it starts the node.
//
//	go run ./e2e/cmd/demo   (root; make demo)
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
	"github.com/sidecar-terminator/sidecar-terminator/images"
)

const ns = "demo"

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) (err error) {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root: it runs a real kubelet and containerd")
	}
	say("bringing the local cluster up (first run builds Kubernetes, etcd and OpenKruise: minutes; later runs: seconds)")
	c, err := cluster.Up(ctx, cluster.UpOptions{Logf: upLog})
	if err != nil {
		return err
	}
	defer func() {
		say("tearing down")
		if stopErr := c.Stop(); stopErr != nil {
			err = fmt.Errorf("%v; teardown: %w", err, stopErr)
		} else {
			say("  everything stopped, host restored, nothing left behind")
		}
	}()
	root, err := repo.Root()
	if err != nil {
		return err
	}
	nodeBin, err := cluster.BuildMockNode(ctx, root)
	if err != nil {
		return err
	}
	if _, err := c.StartVirtualNodes(ctx, nodeBin, []string{virtualNode}); err != nil {
		return err
	}
	say("virtual node %s Ready (label %s=%s): the project's mock virtual-kubelet provider (e2e/virtualnode).",
		virtualNode, cases.VirtualNodeLabelKey, cases.VirtualNodeLabelValue)
	say("  It runs no process: its containers start, restart on an image change and exit by the project's")
	say("  container model (sim/model), so part 2 shows the controller's side of the swap. Of public providers,")
	say("  Alibaba ECI is documented to honour an image change and Azure ACI to ignore it (docs/platforms.md);")
	say("  neither ran here.")
	ctl, err := c.BuildAndStartController(ctx)
	if err != nil {
		return err
	}
	say("controller running as ServiceAccount %s/%s (its own RBAC)", cluster.ControllerNamespace, cluster.ControllerName)
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		return err
	}
	cs := kubernetes.NewForConfigOrDie(c.RestConfig)
	dyn := dynamic.NewForConfigOrDie(c.RestConfig)

	fmt.Println("\n== 1. Job with a marked sidecar on the real node, controller running ==")
	if err := withController(ctx, cs, dyn, job("real-node"), "CRR"); err != nil {
		return fmt.Errorf("%w\ncontroller log:\n%s", err, ctl.LogTail(3000))
	}

	fmt.Println("\n== 2. The same Job on the virtual node, controller running ==")
	if err := withController(ctx, cs, dyn, cases.OnVirtualNode(job("virtual-node")), "swap"); err != nil {
		return fmt.Errorf("%w\ncontroller log:\n%s", err, ctl.LogTail(3000))
	}

	fmt.Println("\n== 3. The same Job on the real node, controller stopped ==")
	if err := ctl.Stop(); err != nil {
		return err
	}
	return withoutController(ctx, cs, dyn)
}

// virtualNode is the mock virtual node's name.
const virtualNode = "mock-virtual-node"

// job is the demo's Job: its sidecar carries both marks, so on a normal node
// it is stopped through a CRR and on a virtual node by swapping in the
// quick-exit image.
func job(name string) *batchv1.Job {
	return cases.JobSpec{Name: name, Namespace: ns, Containers: []cases.Container{
		cases.Main("main", 3, 0),
		cases.Sidecar("sidecar", "exit:0", true).With(cases.EnvWhenJobExitWithImage, images.QuickExit.Ref),
	}}.Build()
}

// timeline prints each step once, with its time since the Job was created.
type timeline struct {
	start time.Time
	seen  map[string]bool
}

func (t *timeline) once(key, format string, args ...any) {
	if t.seen[key] {
		return
	}
	t.seen[key] = true
	fmt.Printf("  +%5.1fs  %s\n", time.Since(t.start).Seconds(), fmt.Sprintf(format, args...))
}

// withController runs j to its end and prints its timeline; path is the way
// its sidecar must be stopped ("CRR" or "swap").
func withController(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, j *batchv1.Job, path string) error {
	tl := &timeline{start: time.Now(), seen: map[string]bool{}}
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create job: %w", err)
	}
	tl.once("job", "Job %s/%s created: main runs 3 s; the sidecar runs until it gets its stop signal", ns, j.Name)
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		pods, err := cases.JobPods(ctx, cs, ns, j.Name)
		if err != nil {
			return err
		}
		for i := range pods {
			observePod(ctx, cs, dyn, tl, &pods[i])
		}
		cur, err := cs.BatchV1().Jobs(ns).Get(ctx, j.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get job: %w", err)
		}
		if f := cases.JobFinished(cur); f != "" {
			tl.once("done", "Job %s", f)
			if f != batchv1.JobComplete {
				return fmt.Errorf("job ended %s, want Complete", f)
			}
			if !tl.seen[path] {
				return fmt.Errorf("job completed without the %s path", path)
			}
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("job %s not finished after 2 minutes", j.Name)
}

func observePod(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, tl *timeline, p *corev1.Pod) {
	if p.Status.Phase == corev1.PodRunning {
		tl.once("running", "pod %s Running on node %s", p.Name, p.Spec.NodeName)
	}
	if code, ok := cases.ExitCode(p, "main"); ok {
		tl.once("main", "main container exited, code %d", code)
	}
	crrs, _ := cases.CRRsForPod(ctx, dyn, ns, p.Name)
	for _, crr := range crrs {
		tl.once("CRR", "controller created ContainerRecreateRequest %s for %v", crr.GetName(), cases.CRRContainers(crr))
	}
	for _, c := range p.Spec.Containers {
		if c.Name == "sidecar" && c.Image == images.QuickExit.Ref {
			tl.once("swap", "controller swapped the sidecar's image for %s; the node restarts it", c.Image)
		}
	}
	if evs, _ := cases.PodEvents(ctx, cs, ns, p.Name, cases.ReasonSidecarTerminating); len(evs) > 0 {
		tl.once("event", "event %s: %s", evs[0].Reason, evs[0].Message)
	}
	if code, ok := cases.ExitCode(p, "sidecar"); ok {
		how := "stopped"
		if len(crrs) > 0 {
			how = "stopped by kruise-daemon (CRI StopContainer: " + stopSignal(p, "sidecar") + ")"
		} else if tl.seen["swap"] {
			how = "restarted as the quick-exit image, which exits at once"
		}
		tl.once("sidecar", "sidecar %s, exit code %d", how, code)
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		tl.once("phase", "pod %s", p.Status.Phase)
	}
}

func withoutController(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) error {
	j := job("no-controller")
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create job: %w", err)
	}
	start := time.Now()
	for range 5 {
		time.Sleep(5 * time.Second)
		pods, err := cases.JobPods(ctx, cs, ns, j.Name)
		if err != nil {
			return err
		}
		cur, err := cs.BatchV1().Jobs(ns).Get(ctx, j.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get job: %w", err)
		}
		fmt.Printf("  +%5.1fs  %s\n", time.Since(start).Seconds(), describe(ctx, dyn, cur, pods))
		if cases.JobFinished(cur) != "" {
			return fmt.Errorf("job finished without the controller; the demo's premise is wrong")
		}
	}
	fmt.Println("  the pod stays Running and the Job never completes; deleting it")
	bg := metav1.DeletePropagationBackground
	if err := cs.BatchV1().Jobs(ns).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		return fmt.Errorf("delete job: %w", err)
	}
	return nil
}

func describe(ctx context.Context, dyn dynamic.Interface, j *batchv1.Job, pods []corev1.Pod) string {
	if len(pods) == 0 {
		return "no pod yet"
	}
	p := &pods[0]
	var parts []string
	parts = append(parts, "pod "+string(p.Status.Phase))
	for _, s := range p.Status.ContainerStatuses {
		switch {
		case s.State.Terminated != nil:
			parts = append(parts, fmt.Sprintf("%s exited %d", s.Name, s.State.Terminated.ExitCode))
		case s.State.Running != nil:
			parts = append(parts, s.Name+" running")
		default:
			parts = append(parts, s.Name+" waiting")
		}
	}
	crrs, _ := cases.CRRsForPod(ctx, dyn, ns, p.Name)
	parts = append(parts, fmt.Sprintf("CRRs %d", len(crrs)), fmt.Sprintf("Job active=%d succeeded=%d", j.Status.Active, j.Status.Succeeded))
	return strings.Join(parts, ", ")
}

func say(format string, args ...any) { fmt.Printf(format+"\n", args...) }

// upLog prints the cluster's start-up lines, less the kubeconfig's path: the
// cluster and its files last only as long as the demo, so a path printed
// would name a file gone by the time anyone could use it.
func upLog(format string, args ...any) {
	line, _, _ := strings.Cut(fmt.Sprintf(format, args...), "; kubeconfig ")
	say("  %s", line)
}

// stopSignal says which signal the runtime sent a container it was asked to
// stop: the one the kubelet reports (containerStatuses[].stopSignal, with
// the ContainerStopSignals feature gate, alpha and off by default up to
// v1.37), else the image's. containerd's CRI sends the image config's
// STOPSIGNAL and SIGTERM when the image sets none
// (containerd v2.4.2, internal/cri/server/container_stop.go); the demo's workload
// image sets none (images.Workload, its Dockerfile).
func stopSignal(p *corev1.Pod, container string) string {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container && s.StopSignal != nil {
			return "its stop signal, " + string(*s.StopSignal)
		}
	}
	return "the image's stop signal: SIGTERM, as the workload image sets no STOPSIGNAL"
}
