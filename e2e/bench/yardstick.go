package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// RunYardstick is the minimal reference terminator: one informer on every
// pod (no field selector, no trimming), and on the first event that shows a
// bench pod's main container terminated while its sidecar runs, one write —
// a CRR on the normal node, an image patch on a virtual one — with no
// expectations, no test ops, no events and no checks. It is what any
// terminator must at least do, so it bounds what this machine allows.
// It touches readyFile once its cache has synced, and runs until ctx ends.
func RunYardstick(ctx context.Context, kubeconfig string, workers int, qps float32, burst int, readyFile string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = qps, burst
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kruise, err := kruiseclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(kube, 0)
	inf := factory.Core().V1().Pods().Informer()
	var acted sync.Map
	work := make(chan *corev1.Pod, 1<<16)
	check := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || !yardstickTakes(pod) {
			return
		}
		if _, dup := acted.LoadOrStore(pod.UID, true); !dup {
			work <- pod
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: check, UpdateFunc: func(_, o any) { check(o) }}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("yardstick cache did not sync")
	}
	if err := os.WriteFile(readyFile, []byte("ready\n"), 0o644); err != nil {
		return err
	}
	var timed writeTimes
	for w := 0; w < workers; w++ {
		go func() {
			for pod := range work {
				start := time.Now()
				_ = yardstickAct(ctx, kube, kruise, pod)
				timed.add(time.Since(start))
			}
		}()
	}
	timed.logEvery(ctx, 10*time.Second)
	return nil
}

// writeTimes sums how long the yardstick's writes took at the client
// (request sent until the answer read), to set beside the controller's own
// figure in the breakdown line: a write's time at the client is what holds a
// worker, and the audit log has only the server's part of it.
type writeTimes struct {
	mu    sync.Mutex
	count int
	total time.Duration
}

func (t *writeTimes) add(d time.Duration) {
	t.mu.Lock()
	t.count++
	t.total += d
	t.mu.Unlock()
}

// logEvery prints the writes of each period that had some, until ctx ends,
// with the time and the garbage collector's cycles and CPU over the period:
// the yardstick caches every pod whole (about 1.4 GiB at 150,000), so each
// of its collections marks that much, and a round's CPU moves with how many
// fell inside it.
func (t *writeTimes) logEvery(ctx context.Context, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	gc := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(gc)
	cycles, gcCPU := gc[0].Value.Uint64(), gc[1].Value.Float64()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		t.mu.Lock()
		count, total := t.count, t.total
		t.count, t.total = 0, 0
		t.mu.Unlock()
		metrics.Read(gc)
		dCycles, dCPU := gc[0].Value.Uint64()-cycles, gc[1].Value.Float64()-gcCPU
		cycles, gcCPU = gc[0].Value.Uint64(), gc[1].Value.Float64()
		if count > 0 || dCycles > 0 {
			mean := time.Duration(0)
			if count > 0 {
				mean = total / time.Duration(count)
			}
			fmt.Fprintf(os.Stderr, "yardstick %s: %d writes in %v, mean %d ms at the client; %d GC cycles, %.2f s of GC CPU\n",
				time.Now().UTC().Format(time.TimeOnly), count, period, mean.Milliseconds(), dCycles, dCPU)
		}
	}
}

// yardstickTakes says whether the yardstick acts on pod: a bench pod, not
// labelled for another terminator, whose main has ended while its sidecar
// runs.
func yardstickTakes(pod *corev1.Pod) bool {
	if len(pod.Status.ContainerStatuses) < 2 || pod.Labels[runLabel] == "" {
		return false
	}
	if t := pod.Labels[terminatorLabel]; t != "" && t != yardstickTerminator {
		return false
	}
	main, side := pod.Status.ContainerStatuses[0], pod.Status.ContainerStatuses[1]
	return main.State.Terminated != nil && side.State.Running != nil
}

func yardstickAct(ctx context.Context, kube kubernetes.Interface, kruise kruiseclient.Interface, pod *corev1.Pod) error {
	if strings.HasPrefix(pod.Spec.NodeName, VirtualNodePrefix) {
		patch, _ := json.Marshal([]map[string]string{{"op": "replace", "path": "/spec/containers/1/image", "value": QuickExitImage}})
		_, err := kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
		return err
	}
	crr := &kruisev1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name + "-yardstick", Namespace: pod.Namespace, Labels: map[string]string{"bench": "yardstick"}},
		Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: pod.Name,
			Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "sidecar"}}},
	}
	_, err := kruise.AppsV1alpha1().ContainerRecreateRequests(pod.Namespace).Create(ctx, crr, metav1.CreateOptions{})
	return err
}

// YardstickUser is the yardstick's identity, so that the audit log tells
// its writes apart from the bench's own.
const YardstickUser = "bench:yardstick"

func startYardstick(ctx context.Context, kubeconfig, runDir string, cfg Config) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ready := filepath.Join(runDir, "yardstick.ready")
	cmd := exec.CommandContext(ctx, exe, "yardstick", "--kubeconfig", kubeconfig, "--ready-file", ready,
		fmt.Sprintf("--workers=%d", cfg.yardstickWorkers()), fmt.Sprintf("--qps=%g", cfg.QPS), fmt.Sprintf("--burst=%d", cfg.Burst))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start yardstick: %w", err)
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			return cmd, nil
		}
	}
	_ = cmd.Process.Kill()
	return nil, fmt.Errorf("yardstick not ready after 2m")
}

// yardstickWorkers is Config.YardstickWorkers, or Workers when unset.
func (c Config) yardstickWorkers() int {
	if c.YardstickWorkers > 0 {
		return c.YardstickWorkers
	}
	return c.Workers
}
