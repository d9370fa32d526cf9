package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// BurstResult is one terminator's burst.
type BurstResult struct {
	Terminator string `json:"terminator"`
	Pods       int    `json:"pods"`
	// ExitSpreadSeconds is how long writing every main's exit took: the API
	// server's write rate bounds how close to "at once" the burst can be.
	ExitSpreadSeconds float64 `json:"exitSpreadSeconds"`
	// Latency from each main's exit (its status write returning) to the
	// terminator's action seen through a watch, in seconds.
	P50, P90, P99, Max float64
	// Latencies are those per-pod latencies, sorted: kept out of
	// latest.json (a run's 60,000 of them would bury its figures) and
	// written to latencies.json instead, for the latency plot.
	Latencies []float64 `json:"-"`
	// AllSucceededSeconds is from the first main exit to the last pod Succeeded.
	AllSucceededSeconds float64 `json:"allSucceededSeconds"`
	NotActedOn          int     `json:"notActedOn"`
	FirstNotActedOn     string  `json:"firstNotActedOn,omitempty"`
	CPUSeconds          float64 `json:"cpuSeconds"`
	CPUSecondsPer1000   float64 `json:"cpuSecondsPer1000Pods"`
	// CPUWithEventsPer1000 is the controller's CPU per 1000 pods until every
	// pod's SidecarTerminating event was seen: its events wait while it is
	// busy (up to five minutes, app.maxEventDefer), and a burst that ends
	// sooner leaves their writing out of CPUSecondsPer1000. Zero for the
	// other terminators.
	CPUWithEventsPer1000 float64 `json:"cpuWithEventsPer1000Pods,omitempty"`
	cpuStart             float64 // the process's CPU seconds at the first exit
	// ServerCPUSeconds is the control plane's CPU over the same span as
	// CPUSeconds, by process (kube-apiserver, etcd): what the burst cost
	// the server, beside what it cost the terminator.
	ServerCPUSeconds map[string]float64 `json:"serverCPUSeconds,omitempty"`
	// Machine is what the whole machine spent over the same span: a
	// terminator that costs the server no more CPU may still leave every
	// process less of the machine's cores.
	Machine       machineCPU `json:"machine"`
	RSSBytesAfter int64      `json:"rssBytesAfter"`
	// RSSBytesPeak is the process's highest RSS from its start (the
	// terminator is started for its burst) to the burst's end.
	RSSBytesPeak int64 `json:"rssBytesPeak"`
	// FirstExit is when the first main exit was written.
	FirstExit time.Time `json:"firstExit"`
	// timeline is the burst second by second, kept beside its log.
	timeline []timelineSecond
}

// machineCPU is the machine's CPU over a burst's span.
type machineCPU struct {
	Seconds float64 `json:"seconds"`      // the span, wall time
	Busy    float64 `json:"busySeconds"`  // every core's busy time together
	Bench   float64 `json:"benchSeconds"` // the bench's own process: its writes, watches and finishers
	Cores   int     `json:"cores"`
}

// burst creates pods running on the bench nodes, then ends every main
// container (as fast as the API server takes it, or at a set pace) and plays
// the nodes: once the terminator acts on a pod, its sidecar exits and the pod
// Succeeds.
type burst struct {
	kube   kubernetes.Interface
	kruise kruiseclient.Interface
	run    string
	pods   []*corev1.Pod

	opts  burstOptions
	start time.Time // the first main exit

	mu      sync.Mutex
	deleted map[string]bool
	owner   map[string]int // each pod's terminator, by ownerOf
	exitAt  map[string]time.Time
	actAt   map[string]time.Time
	doneAt  map[string]time.Time
	finish  chan string // capacity n: sends never block
	closed  bool
}

// burstOptions add faults to a burst, for the chaos runs.
type burstOptions struct {
	// daemonDownFor delays the stop of CRR-path sidecars, as an unavailable
	// kruise-daemon would, counted from the first main exit.
	daemonDownFor time.Duration
	// deleteEvery deletes every k-th pod right after its main exits.
	deleteEvery int
	// during runs beside the burst once the mains start exiting.
	during func(ctx context.Context, b *burst)
	// afterExits runs once every main's exit is written: the terminator's
	// work is then at its largest (the profile of its heap at the peak).
	afterExits func()
	// patience, if set, replaces the default wait after the last main exit.
	patience time.Duration
	// pod builds the i-th pod of the run; nil is jobPod, every other pod
	// on a virtual node.
	pod func(run string, i int) *corev1.Pod
	// exitsPerSecond paces the mains' exits (Config.ExitsPerSecond).
	exitsPerSecond float64
	// servers are the control plane's processes whose CPU the burst counts
	// (BurstResult.ServerCPUSeconds), by name.
	servers map[string]int
}

// exitWriters write the mains' exits: enough that the API server, not the
// bench, sets the pace when the exits are not paced.
const exitWriters = 64

// writeExits calls write for each of the n mains, exitWriters at a time,
// the i-th no sooner than exitDue says.
func writeExits(ctx context.Context, n int, start time.Time, perSecond float64, write func(i int) error) error {
	return parallel(n, exitWriters, func(i int) error {
		if wait := time.Until(exitDue(start, perSecond, i)); wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
		return write(i)
	})
}

// exitDue is when the i-th main's exit may be written: at once unpaced,
// else i/perSecond seconds after the first.
func exitDue(start time.Time, perSecond float64, i int) time.Time {
	if perSecond <= 0 {
		return start
	}
	return start.Add(time.Duration(float64(i) / perSecond * float64(time.Second)))
}

func runBurstWith(ctx context.Context, kube kubernetes.Interface, kruise kruiseclient.Interface, run string, n int, pid int, logf func(string, ...any), opts burstOptions) (BurstResult, error) {
	res, err := runBurst(ctx, kube, kruise, run, n, []proc{{pid: pid}}, logf, opts)
	if err != nil {
		return BurstResult{Pods: n}, err
	}
	return res[0], nil
}

// ownerOf is which of k terminators sharing a burst takes its i-th pod:
// pods go to them two at a time, so that each gets as many on the normal
// node (CRR) as on the virtual ones (image swap), and their exits are
// written interleaved.
func ownerOf(i, k int) int {
	return (i / 2) % max(k, 1)
}

// proc is a terminator's process: its name in the results, and its PID.
type proc struct {
	name string
	pid  int
}

// runBurst is one burst of n pods shared by the terminators procs, the
// i-th pod being the ownerOf(i)'s (opts.pod builds each so): one result
// per terminator, over its own pods and its own process, and the same
// span, control-plane CPU and machine time for all.
func runBurst(ctx context.Context, kube kubernetes.Interface, kruise kruiseclient.Interface, run string, n int, procs []proc, logf func(string, ...any), opts burstOptions) ([]BurstResult, error) {
	b := &burst{kube: kube, kruise: kruise, run: run, opts: opts, exitAt: map[string]time.Time{}, actAt: map[string]time.Time{},
		doneAt: map[string]time.Time{}, deleted: map[string]bool{}, finish: make(chan string, n)}
	if err := b.create(ctx, n, len(procs)); err != nil {
		return nil, err
	}
	logf("%s: %d pods running", run, n)
	watchCtx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	if err := b.watch(watchCtx); err != nil {
		return nil, err
	}
	finishers := sync.WaitGroup{}
	for w := 0; w < finishWorkers; w++ {
		finishers.Add(1)
		go func() { defer finishers.Done(); b.finishPods(watchCtx) }()
	}
	cpu0 := make([]float64, len(procs))
	for k, p := range procs {
		cpu0[k], _ = cpuSeconds(p.pid)
	}
	server0 := cpuOf(opts.servers)
	busy0, _ := machineBusySeconds()
	bench0, _ := cpuSeconds(os.Getpid())

	start := time.Now()
	b.start = start
	if opts.during != nil {
		go opts.during(watchCtx, b)
	}
	if err := writeExits(ctx, n, start, opts.exitsPerSecond, func(i int) error {
		_, err := setStatus(ctx, kube, b.pods[i], corev1.PodRunning, terminated(time.Now()), running(start))
		b.mu.Lock()
		b.exitAt[b.pods[i].Name] = time.Now()
		b.mu.Unlock()
		if err == nil && opts.deleteEvery > 0 && i%opts.deleteEvery == 0 {
			err = b.delete(ctx, b.pods[i].Name)
		}
		return err
	}); err != nil {
		return nil, fmt.Errorf("end the main containers: %w", err)
	}
	spread := time.Since(start).Seconds()
	logf("%s: every main exited in %.1fs", run, spread)
	if opts.afterExits != nil {
		opts.afterExits()
	}

	patience := b.patience(n)
	if opts.patience > 0 {
		patience = opts.patience
	}
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		b.mu.Lock()
		done := len(b.doneAt) + len(b.deleted)
		b.mu.Unlock()
		if done >= n {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cpu1 := make([]float64, len(procs))
	for k, p := range procs {
		cpu1[k], _ = cpuSeconds(p.pid)
	}
	servers := cpuSince(opts.servers, server0)
	busy1, _ := machineBusySeconds()
	bench1, _ := cpuSeconds(os.Getpid())
	machine := machineCPU{Seconds: time.Since(start).Seconds(), Busy: busy1 - busy0, Bench: bench1 - bench0, Cores: runtime.NumCPU()}
	stopWatches()
	b.mu.Lock()
	b.closed = true
	close(b.finish)
	b.mu.Unlock()
	finishers.Wait()
	results := make([]BurstResult, len(procs))
	for k, p := range procs {
		res := &results[k]
		res.Terminator, res.Pods = p.name, b.owned(k)
		res.FirstExit, res.ExitSpreadSeconds = start, spread
		res.ServerCPUSeconds, res.Machine = servers, machine
		res.CPUSeconds = cpu1[k] - cpu0[k]
		res.cpuStart = cpu0[k]
		res.CPUSecondsPer1000 = res.CPUSeconds * 1000 / float64(max(res.Pods, 1))
		res.RSSBytesAfter, _ = rssBytes(p.pid)
		res.RSSBytesPeak, _ = rssPeakBytes(p.pid)
		b.summarize(res, start, k)
	}
	if len(servers) > 0 {
		logf("%s: the control plane's CPU s / 1000 pods over the burst: %s", run, serverCPU(results))
	}
	if machine.Seconds > 0 {
		logf("%s: the machine's cores busy over the burst (on average, of %d): %s", run, machine.Cores, machineShare(results))
	}
	return results, nil
}

// finishWorkers play the nodes' kruise-daemons and virtual nodes: each ends
// one acted-on pod at a time with a status write. 16 were too few at 20,000
// pods: with the API server taking 210 ms a write under the burst they ended
// 76 pods a second, fell minutes behind, and 4,415 CRRs passed their 60 s
// deadline with the sidecar still running, so the controller rightly made a
// second attempt, as it would for a kruise-daemon that had not stopped it.
const finishWorkers = 64

func (b *burst) create(ctx context.Context, n, owners int) error {
	b.pods = make([]*corev1.Pod, n)
	if b.owner == nil {
		b.owner = map[string]int{}
	}
	var mu sync.Mutex
	build := b.opts.pod
	if build == nil {
		build = func(run string, i int) *corev1.Pod { return jobPod(run, i, i%2 == 1) }
	}
	return parallel(n, 32, func(i int) error {
		p, err := b.kube.CoreV1().Pods(Namespace).Create(ctx, build(b.run, i), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create pod: %w", err)
		}
		at := time.Now()
		if p, err = setStatus(ctx, b.kube, p, corev1.PodRunning, running(at), running(at)); err != nil {
			return fmt.Errorf("start pod %s: %w", p.Name, err)
		}
		b.pods[i] = p
		mu.Lock()
		b.owner[p.Name] = ownerOf(i, owners)
		mu.Unlock()
		return nil
	})
}

// watch records the first action on each pod: a CRR naming it, or its
// sidecar's image swapped. Informers rather than bare watches: under a burst
// the API server drops slow watchers, and an informer resumes where it was.
func (b *burst) watch(ctx context.Context) error {
	pods := informers.NewSharedInformerFactoryWithOptions(b.kube, 0, informers.WithNamespace(Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = runLabel + "=" + b.run }))
	podInf := pods.Core().V1().Pods().Informer()
	onPod := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && len(p.Spec.Containers) > 1 && p.Spec.Containers[1].Image == QuickExitImage {
			b.acted(p.Name, false)
		}
	}
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onPod, UpdateFunc: func(_, o any) { onPod(o) }}); err != nil {
		return err
	}
	crrs := kruiseinformers.NewSharedInformerFactoryWithOptions(b.kruise, 0, kruiseinformers.WithNamespace(Namespace))
	crrInf := crrs.Apps().V1alpha1().ContainerRecreateRequests().Informer()
	if _, err := crrInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if crr, ok := obj.(*kruisev1alpha1.ContainerRecreateRequest); ok && strings.HasPrefix(crr.Spec.PodName, b.run+"-") {
			b.acted(crr.Spec.PodName, true)
		}
	}}); err != nil {
		return err
	}
	pods.Start(ctx.Done())
	crrs.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, crrInf.HasSynced) {
		return fmt.Errorf("bench informers did not sync")
	}
	return nil
}

func (b *burst) acted(name string, byCRR bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, seen := b.actAt[name]; seen || b.closed {
		return
	}
	b.actAt[name] = time.Now()
	if byCRR && b.opts.daemonDownFor > 0 {
		// The daemon is away: the sidecar stops when it is back.
		go func() {
			time.Sleep(time.Until(b.start.Add(b.opts.daemonDownFor)))
			b.mu.Lock()
			defer b.mu.Unlock()
			if !b.closed {
				b.finish <- name
			}
		}()
		return
	}
	b.finish <- name
}

func (b *burst) delete(ctx context.Context, name string) error {
	if err := b.kube.CoreV1().Pods(Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	b.mu.Lock()
	b.deleted[name] = true
	b.mu.Unlock()
	return nil
}

// finishPods plays kruise-daemon and the virtual node: the sidecar exits 0,
// and with it the pod Succeeds.
func (b *burst) finishPods(ctx context.Context) {
	byName := map[string]*corev1.Pod{}
	for _, p := range b.pods {
		byName[p.Name] = p
	}
	for name := range b.finish {
		b.mu.Lock()
		gone := b.deleted[name]
		b.mu.Unlock()
		if gone {
			continue
		}
		now := time.Now()
		if _, err := setStatus(ctx, b.kube, byName[name], corev1.PodSucceeded, terminated(now), terminated(now)); err == nil {
			b.mu.Lock()
			b.doneAt[name] = time.Now()
			b.mu.Unlock()
		}
	}
}

// patience is how long to wait for the terminator after the last main exit.
func (b *burst) patience(n int) time.Duration {
	return time.Minute + time.Duration(n)*10*time.Millisecond
}
