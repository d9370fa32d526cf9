package cluster

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// KwokVersion is the kwok the harness builds from its Go module
// (sigs.k8s.io/kwok): the fake kubelet that Kubernetes' scalability work
// runs against a real control plane.
const KwokVersion = "v0.8.0"

// Kwok's own names for the nodes it manages and for its lifecycle stages.
const (
	// KwokNodeAnnotation marks a Node object that kwok plays the kubelet
	// of (--manage-nodes-with-annotation-selector, as kwok's docs name it).
	KwokNodeAnnotation      = "kwok.x-k8s.io/node"
	KwokNodeAnnotationValue = "fake"
	// KwokMainContainer and KwokSidecarContainer are the container names
	// the two pod stages of kwokstages/ act on.
	KwokMainContainer    = "main"
	KwokSidecarContainer = "sidecar"
	// KwokMainExitDelayAnnotation on a pod overrides the main-exit stage's
	// delay for that pod (a duration such as "30s").
	KwokMainExitDelayAnnotation = "main-exit.stage.sidecar-terminator.io/delay"
)

// kwokModuleStages are the stages taken as kwok ships them, relative to
// its module: nodes become Ready and keep a lease, pods become Running, and
// a deleted pod goes. Its pod-complete stage is left out on purpose: it ends
// every Job-owned pod at once, so nothing would wait for a sidecar.
var kwokModuleStages = []string{
	"kustomize/stage/node/fast/node-initialize.yaml",
	"kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"kustomize/stage/pod/fast/pod-ready.yaml",
	"kustomize/stage/pod/fast/pod-delete.yaml",
}

// kwokPodStages are this project's two pod stages: the main ends after a
// set delay, and a sidecar whose image is the quick-exit image ends with
// exit 0 (the pod Succeeds), as a node would run that image.
//
//go:embed kwokstages/*.yaml
var kwokPodStages embed.FS

// KwokBinary builds (once) kwok from its module and returns its path. Its
// go.mod has no replace directives, so a wrapper module that requires it
// resolves exactly kwok's own build list, as etcd's does.
func KwokBinary(ctx context.Context) (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "kwok-"+KwokVersion)
	paths, err := ensureBinaries(ctx, dir, []string{"kwok"}, func(tmp string, _ []string) error {
		mod := filepath.Join(tmp, "wrapper")
		if err := os.MkdirAll(mod, 0o755); err != nil {
			return fmt.Errorf("create kwok wrapper: %w", err)
		}
		gomod := fmt.Sprintf("module sidecar-terminator.local/kwok-wrapper\n\ngo 1.26.0\n\nrequire sigs.k8s.io/kwok %s\n", KwokVersion)
		if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(gomod), 0o644); err != nil {
			return fmt.Errorf("write kwok wrapper go.mod: %w", err)
		}
		if err := goBuild(ctx, mod, filepath.Join(tmp, "kwok"), "-ldflags", "-s -w", "sigs.k8s.io/kwok/cmd/kwok"); err != nil {
			return fmt.Errorf("build kwok %s: %w", KwokVersion, err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return paths["kwok"], nil
}

// KwokStages returns the stage file kwok is started with: kwok's node
// stages and pod-ready/pod-delete from its module, then main-exit (the
// main ends exit 0 mainExit after it started running) and
// sidecar-quick-exit (a sidecar whose image is quickExitImage ends exit 0,
// and the pod Succeeds).
func KwokStages(ctx context.Context, quickExitImage string, mainExit time.Duration) ([]byte, error) {
	src, err := moduleDir(ctx, "sigs.k8s.io/kwok", KwokVersion)
	if err != nil {
		return nil, err
	}
	var docs [][]byte
	for _, rel := range kwokModuleStages {
		b, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			return nil, fmt.Errorf("read kwok stage: %w", err)
		}
		docs = append(docs, b)
	}
	entries, err := kwokPodStages.ReadDir("kwokstages")
	if err != nil {
		return nil, fmt.Errorf("read embedded stages: %w", err)
	}
	fill := strings.NewReplacer("QUICK_EXIT_IMAGE", quickExitImage,
		"MAIN_EXIT_MILLISECONDS", strconv.FormatInt(mainExit.Milliseconds(), 10))
	for _, e := range entries {
		b, err := kwokPodStages.ReadFile("kwokstages/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("read embedded stage %s: %w", e.Name(), err)
		}
		docs = append(docs, []byte(fill.Replace(string(b))))
	}
	for i := range docs {
		docs[i] = bytes.TrimSpace(docs[i])
	}
	return append(bytes.Join(docs, []byte("\n---\n")), '\n'), nil
}

// KwokOptions say how StartKwok runs the control plane and its nodes.
type KwokOptions struct {
	// RunDir as in Options; empty: a new temporary directory.
	RunDir     string
	KeepRunDir bool
	// Nodes is how many kwok nodes to create, named NodePrefix-0000 on.
	Nodes      int
	NodePrefix string
	// NodeLabels are put on every node besides kubernetes.io/hostname:
	// type=virtual-kubelet when nil, the label OpenKruise and the
	// controller know a virtual node by.
	NodeLabels map[string]string
	// QuickExitImage and MainExit fill in the two pod stages.
	QuickExitImage string
	MainExit       time.Duration
	// SchedulerQPS/Burst and ControllerManagerQPS/Burst are the client
	// limits of kube-scheduler and kube-controller-manager (0: 500 and
	// 1000). At their defaults (50 and 20 QPS) the scheduler and the Job
	// controller, not the API server, bound a run of thousands of Jobs.
	SchedulerQPS, SchedulerBurst                 int
	ControllerManagerQPS, ControllerManagerBurst int
	// BeforeControllers as in Options (e.g. to install CRDs).
	BeforeControllers func(ctx context.Context, cp *ControlPlane) error
	Logf              func(format string, args ...any)
}

// KwokCluster is a control plane whose nodes are kwok's: no kubelet, no
// container runtime, nothing on the host beyond processes on 127.0.0.1 and
// a run directory, so it needs none of the real node's host-wide locks.
type KwokCluster struct {
	*ControlPlane
	Kwok  *Process
	Nodes []string
}

// kwokControllers are the controllers kube-controller-manager runs for
// Jobs on kwok nodes: the node-lifecycle controller is not among them (its
// taints and evictions would follow kwok's lease heartbeats, which lag under
// load), so the not-ready taint new nodes get is removed by StartKwok.
const kwokControllers = "job,serviceaccount,serviceaccount-token,podgc,garbagecollector,namespace"

// StartKwok starts etcd and kube-apiserver, kube-controller-manager with
// the Job controller, kube-scheduler, kwok with the stages of KwokStages,
// and o.Nodes kwok nodes, and waits until every node is Ready and
// schedulable. On error everything started is stopped.
func StartKwok(ctx context.Context, o KwokOptions) (_ *KwokCluster, err error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.NodePrefix == "" {
		o.NodePrefix = "kwok-node"
	}
	if o.NodeLabels == nil {
		o.NodeLabels = map[string]string{"type": "virtual-kubelet"}
	}
	o.SchedulerQPS, o.SchedulerBurst = orDefault(o.SchedulerQPS, 500), orDefault(o.SchedulerBurst, 1000)
	o.ControllerManagerQPS, o.ControllerManagerBurst = orDefault(o.ControllerManagerQPS, 500), orDefault(o.ControllerManagerBurst, 1000)
	kwokBin, err := KwokBinary(ctx)
	if err != nil {
		return nil, err
	}
	bins, err := KubernetesBinaries(ctx, KubeControllerManager, KubeScheduler)
	if err != nil {
		return nil, err
	}
	stages, err := KwokStages(ctx, o.QuickExitImage, o.MainExit)
	if err != nil {
		return nil, err
	}
	cp, err := StartControlPlane(ctx, Options{RunDir: o.RunDir, KeepRunDir: o.KeepRunDir, Logf: o.Logf, BeforeControllers: o.BeforeControllers})
	if err != nil {
		return nil, err
	}
	k := &KwokCluster{ControlPlane: cp}
	defer func() {
		if err != nil {
			if stopErr := cp.Stop(); stopErr != nil {
				err = errors.Join(err, fmt.Errorf("and stopping: %w", stopErr))
			}
		}
	}()
	t0 := time.Now()
	if err := cp.startControllerManager(ctx, bins[KubeControllerManager], "--controllers="+kwokControllers,
		"--kube-api-qps="+itoa(o.ControllerManagerQPS), "--kube-api-burst="+itoa(o.ControllerManagerBurst)); err != nil {
		return nil, err
	}
	if err := cp.startScheduler(bins[KubeScheduler], "--kube-api-qps="+itoa(o.SchedulerQPS), "--kube-api-burst="+itoa(o.SchedulerBurst)); err != nil {
		return nil, err
	}
	stageFile := filepath.Join(cp.RunDir, "kwok-stages.yaml")
	if err := os.WriteFile(stageFile, []byte(stages), 0o644); err != nil {
		return nil, fmt.Errorf("write kwok stages: %w", err)
	}
	kc, err := cp.componentKubeconfig("kwok", "kwok", []string{"system:masters"})
	if err != nil {
		return nil, err
	}
	// No --node-port and no --server-address: kwok then serves nothing
	// (no kubelet API, no metrics), so it listens on no address at all.
	if k.Kwok, err = cp.start("kwok", kwokBin, []string{
		"--kubeconfig=" + kc,
		"--config=" + stageFile,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=" + KwokNodeAnnotationValue,
		"--node-lease-duration-seconds=40",
		"--cidr=10.128.0.0/9",
		"--node-ip=127.0.0.1",
	}); err != nil {
		return nil, err
	}
	if k.Nodes, err = createKwokNodes(ctx, cp, k.Kwok, o); err != nil {
		return nil, err
	}
	o.Logf("kube-controller-manager, kube-scheduler, kwok and %d kwok nodes ready in %s", o.Nodes, time.Since(t0).Round(time.Millisecond))
	return k, nil
}

func orDefault(v, d int) int {
	if v > 0 {
		return v
	}
	return d
}

// createKwokNodes creates the nodes, takes off the not-ready taint the API
// server's TaintNodesByCondition admission gives every new node (only the
// node-lifecycle controller would, and it does not run), and waits until
// kwok has made each Ready.
func createKwokNodes(ctx context.Context, cp *ControlPlane, kwok *Process, o KwokOptions) ([]string, error) {
	cfg := *cp.RestConfig
	cfg.QPS, cfg.Burst = 1000, 2000
	cs, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	names := make([]string, o.Nodes)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%04d", o.NodePrefix, i)
	}
	untaint := []byte(`{"spec":{"taints":null}}`)
	if err := Parallel(len(names), 32, func(i int) error {
		labels := map[string]string{"kubernetes.io/hostname": names[i]}
		for k, v := range o.NodeLabels {
			labels[k] = v
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: labels,
			Annotations: map[string]string{KwokNodeAnnotation: KwokNodeAnnotationValue}}}
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", names[i], err)
		}
		if _, err := cs.CoreV1().Nodes().Patch(ctx, names[i], types.MergePatchType, untaint, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("untaint node %s: %w", names[i], err)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	// Polled once a second, not at waitFor's pace: each poll lists every node.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		ready := 0
		for _, n := range list.Items {
			if len(n.Spec.Taints) == 0 && nodeReady(&n) {
				ready++
			}
		}
		switch {
		case ready == o.Nodes:
			return names, nil
		case !kwok.Alive():
			return nil, fmt.Errorf("kwok exited with %d of %d nodes Ready: %s", ready, o.Nodes, kwok.LogTail(3000))
		case time.Now().After(deadline):
			return nil, fmt.Errorf("%d of %d kwok nodes Ready and untainted after 5m; kwok log: %s", ready, o.Nodes, kwok.LogTail(2000))
		}
		if err := sleepCtx(ctx, time.Second); err != nil {
			return nil, err
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Parallel runs f(0..n-1) on at most workers goroutines and returns the
// first error (the others still run to their end).
func Parallel(n, workers int, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		next  = make(chan int)
	)
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}
