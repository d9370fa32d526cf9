package model

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Timings are the kubelet's delays, per node; whoever builds the pod adds
// jitter, since the model has no randomness of its own.
type Timings struct {
	Start             time.Duration // create and start a container whose image is on the node
	Pull              time.Duration // pull an image before its first use in the pod
	SIGTERMExit       time.Duration // a process that handles SIGTERM takes this long to exit
	QuickExitRun      time.Duration // the quick-exit image runs this long, then exits 0
	RestartBackoff    time.Duration // first crash-loop backoff; doubles each restart
	MaxRestartBackoff time.Duration
}

// DefaultTimings are close to a real kubelet with images cached.
func DefaultTimings() Timings {
	return Timings{Start: 500 * time.Millisecond, Pull: 2 * time.Second, SIGTERMExit: 200 * time.Millisecond,
		QuickExitRun: 100 * time.Millisecond, RestartBackoff: 10 * time.Second, MaxRestartBackoff: 5 * time.Minute}
}

// Images says which images a node can pull and which are quick-exit images.
type Images struct {
	// Pullable, when not nil, lists the only images that can be pulled;
	// any other image waits in ErrImagePull.
	Pullable map[string]bool
	// QuickExit images exit 0 at once, whatever their argv.
	QuickExit map[string]bool
}

func (im Images) pullable(image string) bool { return im.Pullable == nil || im.Pullable[image] }

// Config is what a node running pods brings to each of them.
type Config struct {
	Timings Timings
	Images  Images
}

// Kind is where a container sits in the pod spec.
type Kind int

const (
	KindRegular       Kind = iota // spec.containers
	KindInit                      // spec.initContainers, run to completion in order
	KindNativeSidecar             // spec.initContainers with restartPolicy Always
)

// State is a container's state.
type State int

const (
	Waiting State = iota
	Running
	Terminated
)

func (s State) String() string { return [...]string{"waiting", "running", "terminated"}[s] }

// Pod is one pod's containers on a node.
type Pod struct {
	Name          string
	RestartPolicy corev1.RestartPolicy
	Grace         time.Duration
	Init          []*Container // init containers and native sidecars, in spec order
	Regular       []*Container
	Phase         corev1.PodPhase

	cfg      Config
	deleting bool
	// finishing: the API says the pod is finished; nothing runs any more.
	finishing bool
	// restartingAll: a RestartAllContainers rule matched and the kubelet is
	// restarting every container in place; restartedAll counts such restarts.
	restartingAll bool
	restartedAll  int
	version       uint64 // bumped on every change a status would show
}

// Version changes whenever the status would: publish a new status only then.
func (p *Pod) Version() uint64 { return p.version }

// Container is one container's spec facts and runtime state.
type Container struct {
	Name      string
	Kind      Kind
	Image     string
	Behaviour Behaviour

	State        State
	Reason       string // why it waits
	ExitCode     int32
	StartedAt    time.Time
	FinishedAt   time.Time
	RestartCount int32
	ID           string // empty until a container instance was created
	Last         *Exit  // the previous instance's end

	instances int       // container instances created
	runs      int       // runs that ended on their own (the script's index)
	lastImage string    // image of the previous instance: no pull when unchanged
	op        op        // the scheduled transition
	at        time.Time // when op happens
	code      int32     // exit code of a scheduled exit
	stopping  bool      // SIGTERM sent to this instance
	respawn   bool      // restart after this exit whatever the policy (spec changed)
	// killed: the instance killed for a spec change has ended and the new
	// one is being started in the same kubelet sync; the status still shows
	// the killed one as it was.
	killed  *Exit
	backoff time.Duration
	// pullFailed stops retries of an image that cannot be pulled until the
	// spec names another.
	pullFailed bool
	// rules: the container's own restartPolicy and restartPolicyRules.
	rules corev1.Container
}

// Exit is how an earlier container instance ended.
type Exit struct {
	ExitCode   int32
	FinishedAt time.Time
	Reason     string // set when the kubelet removed it to restart the pod in place
}

type op int

const (
	opNone    op = iota
	opStart      // becomes Running, or waits in ErrImagePull
	opExit       // Running becomes Terminated with code
	opBackoff    // a failed container is shown Waiting in CrashLoopBackOff until its restart
)

// NewPod reads the pod's spec; nothing starts before the first Advance.
func NewPod(pod *corev1.Pod, cfg Config) (*Pod, error) {
	p := &Pod{Name: pod.Namespace + "/" + pod.Name, RestartPolicy: pod.Spec.RestartPolicy, Phase: corev1.PodPending, cfg: cfg, Grace: 30 * time.Second}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		p.Grace = time.Duration(*g) * time.Second
	}
	for _, c := range pod.Spec.InitContainers {
		kind := KindInit
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			kind = KindNativeSidecar
		}
		ctr, err := newContainer(pod, c, kind)
		if err != nil {
			return nil, err
		}
		p.Init = append(p.Init, ctr)
	}
	for _, c := range pod.Spec.Containers {
		ctr, err := newContainer(pod, c, KindRegular)
		if err != nil {
			return nil, err
		}
		p.Regular = append(p.Regular, ctr)
	}
	return p, nil
}

func newContainer(pod *corev1.Pod, c corev1.Container, kind Kind) (*Container, error) {
	b, err := ParseBehaviour(pod, c)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return &Container{Name: c.Name, Kind: kind, Image: c.Image, Behaviour: b, Reason: "PodInitializing",
		rules: corev1.Container{RestartPolicy: c.RestartPolicy, RestartPolicyRules: c.RestartPolicyRules}}, nil
}

// Container returns the named container, regular or init.
func (p *Pod) Container(name string) *Container {
	for _, c := range p.Regular {
		if c.Name == name {
			return c
		}
	}
	for _, c := range p.Init {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// NextWake is when the next scheduled transition happens; zero when none is.
func (p *Pod) NextWake() time.Time {
	var next time.Time
	for _, c := range p.all() {
		if c.op != opNone && (next.IsZero() || c.at.Before(next)) {
			next = c.at
		}
	}
	return next
}

func (p *Pod) all() []*Container {
	out := make([]*Container, 0, len(p.Init)+len(p.Regular))
	return append(append(out, p.Init...), p.Regular...)
}

// Terminal reports whether the pod reached Succeeded or Failed.
func (p *Pod) Terminal() bool {
	return p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed
}
