package sim

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/sim/model"
)

// knownImages can be pulled on every node unless its group says otherwise.
var knownImages = []string{WorkloadImage, QuickExitImage, IstioImage}

// IstioImage stands for an injected proxy whose argv is not the workload's.
const IstioImage = "docker.io/istio/proxyv2:1.24.0"

// node is one node: a kubelet running the model, and on normal nodes a
// kruise-daemon.
type node struct {
	name       string
	virtual    bool
	labels     map[string]string
	cfg        model.Config
	kubeletLag time.Duration // how late the kubelet sees a spec change
	daemon     *daemon       // nil on virtual nodes
	pods       int
	// ignoresImageUpdates: the provider never restarts a container whose
	// image changed (NodeGroup.IgnoresImageUpdates).
	ignoresImageUpdates bool
	// facts are what the node says of itself; platform is its placement
	// key (decision.PlatformOf of the facts).
	facts    decision.NodeFacts
	platform decision.Platform
	// young: a node created for the pod (EKS Fargate), whose NodeImage is
	// within the daemon grace whenever it is looked at.
	young bool
	// runsOnWhenTerminal: a virtual-kubelet node that cannot stop one
	// container keeps running a pod whose phase was settled.
	runsOnWhenTerminal bool
}

type daemon struct {
	spec      DaemonSpec
	down      bool
	downUntil time.Time // zero with down: forever
}

func (w *World) makeNodes() {
	for gi, g := range w.s.sc.Nodes {
		pullable := map[string]bool{}
		for _, im := range knownImages {
			pullable[im] = true
		}
		for _, im := range g.Missing {
			delete(pullable, im)
		}
		for i := 0; i < g.Count; i++ {
			n := &node{name: fmt.Sprintf("node-%d-%d", gi, i), virtual: g.Virtual, labels: map[string]string{"kubernetes.io/os": "linux"},
				kubeletLag: 300 * time.Millisecond, ignoresImageUpdates: g.IgnoresImageUpdates}
			timings := model.DefaultTimings()
			if g.Virtual && g.Platform == "" {
				n.name = fmt.Sprintf("virtual-%d-%d", gi, i)
				n.labels["type"] = "virtual-kubelet"
				timings.Pull, n.kubeletLag = 5*time.Second, time.Second
			} else if !g.NoDaemon && (g.Platform == "" || g.Platform.Capabilities().KruiseDaemon) {
				n.daemon = &daemon{spec: g.Daemon}
				if n.daemon.spec.Pickup == 0 {
					n.daemon.spec.Pickup = time.Second
				}
				if w.s.chance(g.Daemon.DownFraction) {
					n.daemon.down = true
					if g.Daemon.DownFor > 0 {
						n.daemon.downUntil = Epoch.Add(g.Daemon.DownFor)
					}
				}
			}
			n.facts = decision.NodeFacts{Name: n.name, Labels: n.labels}
			if g.Platform != "" {
				w.platformNode(n, g.Platform, gi, i, &timings)
			}
			n.platform, _ = decision.PlatformOf(n.facts, n.virtual)
			timings.Start = w.s.jitter(timings.Start, 0.5)
			n.cfg = model.Config{Timings: timings, Images: model.Images{Pullable: pullable, QuickExit: map[string]bool{QuickExitImage: true}}}
			w.nodes = append(w.nodes, n)
		}
	}
}

// pickNode places pods round-robin over the nodes of the kind, so a
// broadcast-style scenario (as many pods as nodes) gets one pod per node.
func (s *Sim) pickNode(kind decision.Platform) *node {
	w := s.world
	if w.byKind == nil {
		w.byKind = map[decision.Platform][]*node{}
		for _, n := range w.nodes {
			w.byKind[n.platform] = append(w.byKind[n.platform], n)
		}
		w.rr = map[decision.Platform]int{}
	}
	nodes := w.byKind[kind]
	if len(nodes) == 0 {
		panic(fmt.Sprintf("scenario %s: no node of platform %s", s.sc.Name, kind))
	}
	n := nodes[w.rr[kind]%len(nodes)]
	w.rr[kind]++
	n.pods++
	return n
}

// kubeletAdmit starts running a pod on its node, with the spec as it is now.
func (s *Sim) kubeletAdmit(e *podEntry) {
	if e.gone || e.rt != nil {
		return
	}
	rt, err := model.NewPod(e.obj, e.node.cfg)
	if err != nil {
		panic(fmt.Sprintf("scenario %s: %v", s.sc.Name, err))
	}
	e.rt = rt
	if e.obj.DeletionTimestamp != nil {
		rt.Delete(s.now())
	}
	s.kubeletSync(e)
}

// kubeletSync advances the pod's containers to now, publishes the status if
// it changed, and schedules the next wake.
func (s *Sim) kubeletSync(e *podEntry) {
	if e.gone || e.rt == nil {
		return
	}
	now := s.now()
	e.rt.Advance(now)
	if v := e.rt.Version(); v != e.published {
		e.published = v
		st := e.rt.Status()
		s.trace.add(e.obj.Name, "status %s", describeStatus(st))
		s.world.setPodStatus(e, st)
		s.jobController(e)
	}
	if e.rt.Gone() {
		s.world.removePod(e)
		return
	}
	next := e.rt.NextWake()
	if next.IsZero() || (!e.wake.IsZero() && !e.wake.After(next) && e.wake.After(now)) {
		return
	}
	e.wake = next
	s.at(next, func() {
		if e.wake.Equal(next) {
			e.wake = time.Time{}
			s.kubeletSync(e)
		}
	})
}

// kubeletSeeSpec applies the pod spec's images to the running pod: the
// kubelet restarts a container whose image changed.
func (s *Sim) kubeletSeeSpec(e *podEntry) {
	if e.gone || e.rt == nil {
		return
	}
	if e.node.ignoresImageUpdates {
		s.trace.add(e.obj.Name, "node %s ignores the pod's image update", e.node.name)
		return
	}
	for _, c := range e.obj.Spec.Containers {
		if rc := e.rt.Container(c.Name); rc != nil && rc.Image != c.Image {
			s.check.stopRequested(e, c.Name, "image change")
		}
		stopped, err := e.rt.SetImage(c.Name, c.Image, s.now())
		if err != nil {
			panic(err)
		}
		if stopped {
			s.trace.add(e.obj.Name, "kubelet restarts %s for image %s", c.Name, c.Image)
			s.check.kill(e, c.Name, "image change")
		}
	}
	s.kubeletSync(e)
}

// kubeletSeeFinished is the kubelet noticing that the API phase of the pod
// became terminal without it: it stops the pod's containers.
func (s *Sim) kubeletSeeFinished(e *podEntry) {
	if e.gone || e.rt == nil {
		return
	}
	s.trace.add(e.obj.Name, "kubelet sees phase %s: stops the pod's containers", e.obj.Status.Phase)
	e.rt.Finish(s.now())
	s.kubeletSync(e)
}

// kubeletWriteBack is the kubelet's status manager writing its cached phase
// over a phase the controller settled, before the kubelet synced the pod;
// the conditions stay (the kubelet merges them). The controller settles
// again, and the kubelet, syncing then, sees the terminal phase.
func (s *Sim) kubeletWriteBack(e *podEntry) {
	if e.gone || e.rt == nil || !terminalPhase(e.obj.Status.Phase) {
		return
	}
	pod := *e.obj
	pod.Status.Phase = e.rt.Status().Phase
	s.trace.add(e.obj.Name, "kubelet writes its cached phase %s back over %s", pod.Status.Phase, e.obj.Status.Phase)
	s.loseEvents = s.sc.Faults.WriteBackUnseen
	s.world.replacePod(e, &pod)
	s.loseEvents = false
}

// jobController deletes a pod whose mains restarted more than its Job's
// backoffLimit allows.
func (s *Sim) jobController(e *podEntry) {
	limit := e.tmpl.BackoffLimit
	if limit == 0 || e.obj.DeletionTimestamp != nil {
		return
	}
	restarts := 0
	for _, c := range e.obj.Status.ContainerStatuses {
		if !e.truth.sidecars[c.Name] {
			restarts += int(c.RestartCount)
		}
	}
	if restarts > limit {
		s.world.deletePod(e, "job backoffLimit exceeded")
	}
}

// describeStatus is the compact status line of the trace.
func describeStatus(st corev1.PodStatus) string {
	var b strings.Builder
	b.WriteString(string(st.Phase))
	for _, list := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, c := range list {
			fmt.Fprintf(&b, " %s=", c.Name)
			switch {
			case c.State.Running != nil:
				b.WriteString("R")
			case c.State.Terminated != nil:
				fmt.Fprintf(&b, "T%d", c.State.Terminated.ExitCode)
			case c.State.Waiting != nil:
				fmt.Fprintf(&b, "W(%s)", c.State.Waiting.Reason)
			}
			if c.RestartCount > 0 {
				fmt.Fprintf(&b, "/r%d", c.RestartCount)
			}
		}
	}
	return b.String()
}
