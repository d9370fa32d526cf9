// Package provider is the virtual-kubelet provider of the mock virtual node:
// it plays each pod's containers with the simulator's container-lifecycle
// model (package sim/model), in real time, and reports their status to the
// API server through virtual-kubelet's NotifyPods. The model is the one the
// simulator drives in virtual time, so a Job behaves the same in both.
//
// Unlike virtual-kubelet's own mock provider, state sits behind one mutex,
// every pod handed in or out is a deep copy, and time comes from an injected
// clock. Only the Run loop publishes status, so the API server never sees an
// older status after a newer one.
package provider

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/sidecar-terminator/sidecar-terminator/sim/model"
)

// Default image names: the ones images/ builds and the e2e Jobs use.
const (
	DefaultWorkloadImage  = "ghcr.io/sidecar-terminator/workload:dev"
	DefaultQuickExitImage = "ghcr.io/sidecar-terminator/quick-exit:dev"
)

// Config is one node's provider configuration.
type Config struct {
	// NodeName is the node the pods run on.
	NodeName string
	// NodeIP is reported as each pod's hostIP.
	NodeIP string
	// Clock drives the containers; the real clock in the binary, a fake one
	// in tests.
	Clock clock.Clock
	// Timings are the model's delays; Timings.Pull is the pull delay before a
	// container starts with an image it has not run yet (an image swap too).
	Timings model.Timings
	// Pullable images can be pulled; any other image waits in ErrImagePull,
	// as it would on a real node that cannot reach a registry.
	Pullable []string
	// QuickExit images exit 0 at once whatever their argv; they are
	// pullable too.
	QuickExit []string
	// Unpullable images fail to pull even if listed above.
	Unpullable []string
	// Logger receives one line per pod lifecycle call; nil discards.
	Logger *slog.Logger
	// Profile is the real provider the node plays (profile.go); empty is
	// ProfileRestart.
	Profile Profile
}

// DefaultConfig is a node that pulls the workload and quick-exit images.
func DefaultConfig(nodeName string) Config {
	t := model.DefaultTimings()
	t.Pull = 500 * time.Millisecond
	return Config{NodeName: nodeName, NodeIP: "127.0.0.1", Clock: clock.RealClock{}, Timings: t,
		Pullable: []string{DefaultWorkloadImage}, QuickExit: []string{DefaultQuickExitImage}}
}

// Provider runs the pods of one virtual node.
type Provider struct {
	cfg   Config
	mcfg  model.Config
	clock clock.Clock
	log   *slog.Logger
	kick  chan struct{}

	mu     sync.Mutex
	pods   map[string]*entry
	notify func(*corev1.Pod)
}

// entry is one pod: the spec as last handed in, and its running model.
type entry struct {
	pod       *corev1.Pod // owned deep copy; its Status is what the API had at create
	rt        *model.Pod
	started   metav1.Time
	conds     []corev1.PodCondition // the conditions last computed, for transition times
	published uint64                // rt.Version() last published
	deleted   bool
}

// New returns a provider; call Run to make its containers' time pass.
func New(cfg Config) (*Provider, error) {
	if cfg.NodeName == "" {
		return nil, fmt.Errorf("provider config: empty node name")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	images := model.Images{Pullable: map[string]bool{}, QuickExit: map[string]bool{}}
	for _, im := range cfg.Pullable {
		images.Pullable[im] = true
	}
	for _, im := range cfg.QuickExit {
		images.Pullable[im], images.QuickExit[im] = true, true
	}
	for _, im := range cfg.Unpullable {
		delete(images.Pullable, im)
	}
	return &Provider{cfg: cfg, mcfg: model.Config{Timings: cfg.Timings, Images: images}, clock: cfg.Clock,
		log: cfg.Logger.With("node", cfg.NodeName), kick: make(chan struct{}, 1), pods: map[string]*entry{}}, nil
}

func key(namespace, name string) string { return namespace + "/" + name }

// CreatePod starts playing the pod's containers.
func (p *Provider) CreatePod(_ context.Context, pod *corev1.Pod) error {
	pod = pod.DeepCopy()
	rt, err := model.NewPod(pod, p.mcfg)
	if err != nil {
		// An argv the workload grammar does not know: the pod cannot be
		// played. virtual-kubelet marks it failed with this message.
		return errdefs.AsInvalidInput(err)
	}
	now := p.clock.Now()
	p.mu.Lock()
	// published starts at an impossible version so that the first Tick
	// reports the pod as the kubelet does on admission: Pending, with a
	// status per container.
	p.pods[key(pod.Namespace, pod.Name)] = &entry{pod: pod, rt: rt, started: metav1.NewTime(now), published: math.MaxUint64}
	p.mu.Unlock()
	p.log.Info("create pod", "pod", podKey(pod))
	p.wake()
	return nil
}

// UpdatePod applies a changed pod spec. An image change restarts that
// container with the new image, under any restart policy, as the kubelet
// does when a container's spec hash changes.
func (p *Provider) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	pod = pod.DeepCopy()
	now := p.clock.Now()
	p.mu.Lock()
	e, ok := p.pods[key(pod.Namespace, pod.Name)]
	if !ok || e.pod.UID != pod.UID {
		p.mu.Unlock()
		// A pod recreated under the same name is a new pod.
		return p.CreatePod(ctx, pod)
	}
	if !p.cfg.Profile.RestartsOnImageChange() {
		// The provider this node plays runs the containers on as they are
		// (profile.go); the model never hears of the new images.
		p.mu.Unlock()
		p.log.Info("update pod ignored", "pod", podKey(pod), "profile", p.cfg.Profile)
		return nil
	}
	var restarted []string
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			stopped, err := e.rt.SetImage(c.Name, c.Image, now)
			if err != nil {
				p.mu.Unlock()
				return errdefs.AsInvalidInput(err)
			}
			if stopped {
				restarted = append(restarted, c.Name+"="+c.Image)
			}
		}
	}
	status := e.pod.Status
	e.pod = pod
	e.pod.Status = status // the API's status at create; ours is computed
	p.mu.Unlock()
	p.log.Info("update pod", "pod", podKey(pod), "restarted", restarted)
	p.wake()
	return nil
}

// DeletePod stops every container (SIGTERM, SIGKILL after the grace
// period); the pod is forgotten once none runs.
func (p *Provider) DeletePod(_ context.Context, pod *corev1.Pod) error {
	now := p.clock.Now()
	p.mu.Lock()
	e, ok := p.pods[key(pod.Namespace, pod.Name)]
	if !ok {
		p.mu.Unlock()
		return errdefs.NotFoundf("pod %s/%s is not on node %s", pod.Namespace, pod.Name, p.cfg.NodeName)
	}
	if !e.deleted {
		e.deleted = true
		e.rt.Delete(now)
	}
	p.mu.Unlock()
	p.log.Info("delete pod", "pod", podKey(pod))
	p.wake()
	return nil
}

// GetPod returns the pod with its current status.
func (p *Provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.pods[key(namespace, name)]
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s is not on node %s", namespace, name, p.cfg.NodeName)
	}
	return p.podWithStatus(e, p.clock.Now()), nil
}

// GetPodStatus returns the pod's current status.
func (p *Provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods returns every pod the node plays.
func (p *Provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	out := make([]*corev1.Pod, 0, len(p.pods))
	for _, e := range p.pods {
		out = append(out, p.podWithStatus(e, now))
	}
	return out, nil
}

// NotifyPods is called once by virtual-kubelet's pod controller with the
// function that takes status updates; only Tick calls it.
func (p *Provider) NotifyPods(_ context.Context, notify func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = notify
	p.mu.Unlock()
	p.wake()
}

func (p *Provider) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run advances the pods whenever a transition is due or a pod call changed
// something, until ctx ends.
func (p *Provider) Run(ctx context.Context) {
	for {
		next := p.Tick()
		var due <-chan time.Time
		var t clock.Timer
		if !next.IsZero() {
			t = p.clock.NewTimer(next.Sub(p.clock.Now()))
			due = t.C()
		}
		select {
		case <-ctx.Done():
		case <-p.kick:
		case <-due:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// Tick advances every pod to the clock's now, publishes the status of each
// pod that changed, forgets deleted pods whose containers have all stopped,
// and returns when the next transition is due (zero: none is scheduled).
func (p *Provider) Tick() time.Time {
	now := p.clock.Now()
	var out []*corev1.Pod
	var next time.Time
	p.mu.Lock()
	notify := p.notify
	for k, e := range p.pods {
		e.rt.Advance(now)
		if v := e.rt.Version(); v != e.published && notify != nil {
			e.published = v
			out = append(out, p.podWithStatus(e, now))
		}
		if e.deleted && e.rt.Gone() {
			delete(p.pods, k)
			continue
		}
		if w := e.rt.NextWake(); !w.IsZero() && (next.IsZero() || w.Before(next)) {
			next = w
		}
	}
	p.mu.Unlock()
	// Outside the lock: the callback may wait for virtual-kubelet's caches.
	for _, pod := range out {
		notify(pod)
	}
	return next
}

func podKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }
