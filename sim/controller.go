package sim

import (
	"fmt"
	"io"
	"sort"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// syncCost is the virtual time one Sync takes a worker, unless the
// scenario's SyncCost says otherwise.
const syncCost = 500 * time.Microsecond

// measuredWriteCost is the virtual time each API call of a sync (a write, a
// live read) holds the worker on top of its SyncCost: every scenario's
// unless it says otherwise (Scenario.WriteCost, FreeWrites). The simulated
// controller has one worker; the real one has many (app.DefaultWorkers), each
// waiting for the API server's answer. Measured on the real API server under
// a burst (e2e/bench's breakdown of the controller, 2,000 and 20,000 pods on
// one loaded 2-core machine: 116-381 ms a request, 210 ms at 20,000): 128 ms
// over the 32 workers it then had is 4 ms of one worker's time per call. It
// now ships 64, so a call holds the real controller about half that: the
// simulated one is the slower, which leaves more room for the races the
// scenarios look for. Without it a sync that writes costs
// what one that writes nothing costs (the decision alone, about 40 µs
// measured, 0.5 ms here), and the simulated controller wrote 2,000 times a
// second where the real one wrote 80-280 times (docs/measurements.md,
// "Simulator against the measurements").
const measuredWriteCost = 4 * time.Millisecond

// Options tune a run beyond its scenario.
type Options struct {
	Pods int // overrides the scenario's pod count when set
	// WriteCost, when set, overrides the scenario's; FreeWrites makes API
	// calls cost the worker nothing (Scenario.FreeWrites).
	WriteCost  time.Duration
	FreeWrites bool
	TraceOut   io.Writer // every trace line, or TracePod's only
	TracePod   string
	// WrapReader sits between the controller and its cache. It exists for
	// tests that plant a bug (a Reader that lies) to show the checker fails.
	WrapReader func(reconciler.Reader) reconciler.Reader
	// MaxSteps and MaxStepsPerInstant override the step bounds (zero: the
	// defaults of stepBounds); exceeding either is a liveness violation.
	MaxSteps, MaxStepsPerInstant uint64
	// NoUpdateFilter queues every delivered update, as the controller did
	// before its pre-enqueue filter: the baseline the filter is compared to.
	NoUpdateFilter bool
}

// controller is one running instance: its own informer cache, queue and
// reconciler memory, all lost when it crashes or loses the lease.
type controller struct {
	s     *Sim
	id    int
	cache *Cache
	queue *Queue
	rec   *reconciler.Reconciler
	alive bool
	busy  bool
}

// startController starts an instance that lists the world, as informers do.
func (s *Sim) startController(id int) *controller {
	c := &controller{s: s, id: id, alive: true}
	c.cache = s.world.listCache(s.crrServed())
	c.cache.served = s.crrServed
	c.cache.nodeImages = !s.sc.NoCRRAPI
	c.queue = newQueue(s, c.kick)
	var r reconciler.Reader = c.cache
	if s.opts.WrapReader != nil {
		r = s.opts.WrapReader(r)
	}
	cfg := reconciler.DefaultConfig()
	cfg.Policy.AllowedQuickExitImages = s.sc.AllowedImages
	if len(s.sc.AllowedImages) == 0 {
		// Scenarios that name no allowlist swap whatever their pods name,
		// the unpullable images included, to exercise the follow-through.
		cfg.Policy.AllowedQuickExitImages = []string{decision.AllowAnyImage}
	}
	cfg.Policy.DefaultQuickExitImage = s.sc.DefaultQuickExitImage
	if s.sc.CRRTTLSetting > 0 {
		cfg.CRRTTLAfterFinished = s.sc.CRRTTLSetting
	}
	// The API writer also serves the live reads, from the world: the
	// simulated API server's truth, never the instance's cache.
	api := &apiWriter{s: s, c: c}
	c.rec = reconciler.New(cfg, r, api, api, &recorder{s: s}, nil, s.clock)
	s.ctrls = append(s.ctrls, c)
	s.trace.add("controller", "instance %d started with %d pods listed", id, len(c.cache.pods))
	keys := make([]cache.ObjectName, 0, len(c.cache.pods))
	for k := range c.cache.pods {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, k := range keys {
		if !c.dropPodAdd(c.cache.pods[k]) {
			c.queue.Add(k)
		}
	}
	return c
}

// stop ends an instance: its pending work and deliveries are dropped.
func (s *Sim) stopController(c *controller, why string) {
	c.alive = false
	c.queue.shutdown = true
	for i, x := range s.ctrls {
		if x == c {
			s.ctrls = append(s.ctrls[:i], s.ctrls[i+1:]...)
			break
		}
	}
	s.trace.add("controller", "instance %d stopped (%s)", c.id, why)
}

func (c *controller) kick() {
	if c.busy || !c.alive || c.queue.Len() == 0 {
		return
	}
	c.busy = true
	c.s.after(c.s.sc.SyncCost, c.work)
}

// work is one worker turn: processNextWorkItem of the production controller.
func (c *controller) work() {
	c.busy = false
	if !c.alive {
		return
	}
	key, ok := c.queue.Get()
	if !ok {
		return
	}
	if c.rec.IdleWake(key) {
		// Sync passes over it without a decision: proved harmless as it
		// happens, as the filters' drops are.
		c.mustBeIgnored(c.cache.pods[key], "a wake of a pod it does not remember")
	}
	calls := c.s.stats.apiCalls()
	after, err := c.rec.Sync(c.s.ctx, key)
	c.s.stats.syncs++
	c.queue.Done(key)
	if err != nil {
		c.s.trace.add(key.Name, "sync error: %v", err)
	}
	reconciler.Requeue(c.queue, key, after, err)
	if n := c.s.stats.apiCalls() - calls; n > 0 && c.s.sc.WriteCost > 0 {
		// The worker waits for the API server's answers before it takes the
		// next key (measuredWriteCost).
		c.busy = true
		c.s.after(time.Duration(n)*c.s.sc.WriteCost, func() {
			c.busy = false
			c.kick()
		})
		return
	}
	c.kick()
}

// observePod is the pod informer's watch: the cache sees the change late,
// then the key is queued; faults drop, duplicate or hold back notifications.
func (c *controller) observePod(key cache.ObjectName, pod *corev1.Pod, deleted bool) {
	c.deliver(func() {
		held := c.cache.pods[key]
		c.cache.storePod(key, pod, deleted)
		if !deleted && c.dropPodUpdate(key, held, c.cache.pods[key]) {
			return
		}
		c.queue.Add(key)
	}, func() {
		if e := c.s.world.pods[key]; e != nil {
			c.cache.storePod(key, e.obj, false)
		} else if held, ok := c.cache.pods[key]; ok {
			c.cache.storePod(key, held, true)
		}
		c.queue.Add(key)
	})
}

func (c *controller) observeCRR(crr *kruisev1alpha1.ContainerRecreateRequest, deleted bool) {
	if !c.cache.crrAPI || crr.Labels[reconciler.LabelManagedBy] != reconciler.ManagedByValue {
		// The informer lists only CRRs with our label (kube.Caches).
		return
	}
	podKey := cache.ObjectName{Namespace: crr.Namespace, Name: crr.Spec.PodName}
	key := cache.ObjectName{Namespace: crr.Namespace, Name: crr.Name}
	c.deliver(func() {
		held := c.cache.crrs[key]
		c.cache.storeCRR(crr, deleted)
		if c.dropCRREvent(podKey, held, c.cache.crrs[key], deleted) {
			return
		}
		c.queue.Add(podKey)
	}, func() {
		if now := c.s.world.crrs[key]; now != nil {
			c.cache.storeCRR(now, false)
		} else if held, ok := c.cache.crrs[key]; ok {
			c.cache.storeCRR(held, true)
		}
		c.queue.Add(podKey)
	})
}

func (c *controller) deliver(apply, relist func()) {
	s, f := c.s, c.s.sc.Faults
	run := func(fn func()) func() {
		return func() {
			if c.alive {
				fn()
			}
		}
	}
	if s.loseEvents || s.chance(f.DropEvents) {
		s.stats.dropped++
		s.after(s.jitter(f.RelistAfter, 0.5), run(relist))
		return
	}
	lag := s.jitter(f.CacheLag, f.CacheJitter)
	if s.chance(f.ReorderEvents) {
		lag += time.Duration(s.rng.Int64N(int64(f.ReorderWindow)))
	}
	s.after(lag, run(apply))
	if s.chance(f.DupEvents) {
		s.after(lag+s.jitter(100*time.Millisecond, 0.5), run(apply))
	}
}

// scheduleFaults starts the crash and leader-change processes.
func (s *Sim) scheduleFaults() {
	f := s.sc.Faults
	next := 1
	if f.CrashEvery > 0 {
		var crash func()
		crash = func() {
			if len(s.ctrls) > 0 {
				s.stopController(s.ctrls[len(s.ctrls)-1], "crash")
				next++
				id := next
				s.after(s.jitter(f.RestartDelay, 0.5), func() { s.startController(id) })
			}
			s.after(time.Duration(s.rng.ExpFloat64()*float64(f.CrashEvery)), crash)
		}
		s.after(time.Duration(s.rng.ExpFloat64()*float64(f.CrashEvery)), crash)
	}
	if f.LeaderEvery > 0 {
		var change func()
		change = func() {
			if len(s.ctrls) > 0 {
				old := s.ctrls[len(s.ctrls)-1]
				next++
				s.startController(next)
				s.after(s.jitter(f.LeaderOverlap, 0.5), func() {
					if old.alive {
						s.stopController(old, "lost the lease")
					}
				})
			}
			s.after(time.Duration(s.rng.ExpFloat64()*float64(f.LeaderEvery)), change)
		}
		s.after(time.Duration(s.rng.ExpFloat64()*float64(f.LeaderEvery)), change)
	}
}

// recorder turns the controller's events into checker facts and trace lines.
type recorder struct{ s *Sim }

func (r *recorder) Event(obj runtime.Object, eventtype, reason, message string) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		panic(fmt.Sprintf("event on %T", obj))
	}
	r.s.check.event(pod, eventtype, reason)
	r.s.trace.add(pod.Name, "event %s %s: %s", eventtype, reason, message)
}
