package kwok

import (
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// jobTimes are when the run's watch first saw each step of one Job. They
// are the watcher's clock, not the objects' timestamps, which the API
// carries in whole seconds.
type jobTimes struct {
	running   time.Time // its pod Running
	mainExit  time.Time // its pod's main terminated
	write     time.Time // the pod's sidecar image is the quick-exit image: the terminator's write
	succeeded time.Time // its pod Succeeded
	complete  time.Time // the Job's Complete condition True
}

// timeline watches the run's pods and Jobs and keeps each Job's times.
type timeline struct {
	mu   sync.Mutex
	jobs map[string]*jobTimes
	// counts of Jobs past each step, for progress and waits
	running, exited, written, succeeded, complete int
	stop                                          chan struct{}
}

func watchTimeline(kube kubernetes.Interface) *timeline {
	t := &timeline{jobs: map[string]*jobTimes{}, stop: make(chan struct{})}
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(Namespace))
	pods, jobs := f.Core().V1().Pods().Informer(), f.Batch().V1().Jobs().Informer()
	_, _ = pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { t.pod(o) },
		UpdateFunc: func(_, o any) { t.pod(o) },
	})
	_, _ = jobs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { t.job(o) },
		UpdateFunc: func(_, o any) { t.job(o) },
	})
	f.Start(t.stop)
	f.WaitForCacheSync(t.stop)
	return t
}

func (t *timeline) close() { close(t.stop) }

func (t *timeline) entry(job string) *jobTimes {
	e := t.jobs[job]
	if e == nil {
		e = &jobTimes{}
		t.jobs[job] = e
	}
	return e
}

// mark sets *at to now once, and counts it.
func mark(at *time.Time, now time.Time, count *int) {
	if at.IsZero() {
		*at = now
		*count++
	}
}

func (t *timeline) pod(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	name := p.Labels[batchv1.JobNameLabel]
	if name == "" {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(name)
	if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded {
		mark(&e.running, now, &t.running)
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == cluster.KwokMainContainer && s.State.Terminated != nil {
			mark(&e.mainExit, now, &t.exited)
		}
	}
	for _, c := range p.Spec.Containers {
		if c.Name == cluster.KwokSidecarContainer && c.Image == QuickExitImage {
			mark(&e.write, now, &t.written)
		}
	}
	if p.Status.Phase == corev1.PodSucceeded {
		mark(&e.succeeded, now, &t.succeeded)
	}
}

func (t *timeline) job(o any) {
	j, ok := o.(*batchv1.Job)
	if !ok {
		return
	}
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			now := time.Now()
			t.mu.Lock()
			mark(&t.entry(j.Name).complete, now, &t.complete)
			t.mu.Unlock()
		}
	}
}

// counts is a snapshot of how many Jobs are past each step.
type counts struct{ Running, Exited, Written, Succeeded, Complete int }

func (t *timeline) counts() counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	return counts{t.running, t.exited, t.written, t.succeeded, t.complete}
}

// spans returns, over the Jobs that reached both steps, the seconds from
// one step to the other, and the latest time any Job reached to.
func (t *timeline) spans(from, to func(*jobTimes) time.Time) (secs []float64, last time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.jobs {
		a, b := from(e), to(e)
		if b.After(last) {
			last = b
		}
		if a.IsZero() || b.IsZero() {
			continue
		}
		secs = append(secs, b.Sub(a).Seconds())
	}
	return secs, last
}

func atRunning(e *jobTimes) time.Time   { return e.running }
func atMainExit(e *jobTimes) time.Time  { return e.mainExit }
func atWrite(e *jobTimes) time.Time     { return e.write }
func atSucceeded(e *jobTimes) time.Time { return e.succeeded }
func atComplete(e *jobTimes) time.Time  { return e.complete }
