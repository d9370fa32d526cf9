package sim

import (
	"fmt"
	"strconv"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/sim/model"
)

// podEntry is one pod in the world: the API object, and what runs on its node.
type podEntry struct {
	obj       *corev1.Pod // the current version; never mutated once published
	rt        *model.Pod  // nil until the kubelet picked the pod up
	node      *node
	tmpl      *Template
	truth     *truth
	published uint64    // rt.Version() last published
	wake      time.Time // the pending kubelet wake, to drop superseded ones
	gone      bool
}

func (e *podEntry) key() cache.ObjectName {
	return cache.ObjectName{Namespace: e.obj.Namespace, Name: e.obj.Name}
}

// World is the API server's truth: pods, nodes and CRRs with resourceVersions.
type World struct {
	s     *Sim
	rv    int64
	pods  map[cache.ObjectName]*podEntry
	byUID map[types.UID]*podEntry
	crrs  map[cache.ObjectName]*kruisev1alpha1.ContainerRecreateRequest
	// crrsOf indexes CRRs by their owner pod's UID, in creation order.
	crrsOf  map[types.UID][]cache.ObjectName
	nodes   []*node
	byKind  map[decision.Platform][]*node // nodes by platform (placement)
	rr      map[decision.Platform]int
	created int // pods created from the scenario's count (not recreations)
	uids    int
	crrUIDs int // a CRR's UID: a timer of a deleted CRR must not act on one re-made under its name
	// crdRemoved: OpenKruise's CRD was deleted (the CRDRemoved fault).
	crdRemoved bool
	// jobs holds the podFailurePolicy of each pod's own Job (jobverdict.go).
	jobs map[cache.ObjectName]*batchv1.PodFailurePolicy
}

func newWorld(s *Sim) *World {
	return &World{s: s, pods: map[cache.ObjectName]*podEntry{}, byUID: map[types.UID]*podEntry{},
		crrs: map[cache.ObjectName]*kruisev1alpha1.ContainerRecreateRequest{}, crrsOf: map[types.UID][]cache.ObjectName{}}
}

func (w *World) nextRV() string {
	w.rv++
	return strconv.FormatInt(w.rv, 10)
}

// setup makes the nodes, the controller and the pods' arrival.
func (w *World) setup() {
	w.makeNodes()
	w.s.startController(0)
	w.s.scheduleFaults()
	w.s.scheduleCRDRemoval()
	n := w.s.sc.Pods
	for i := 0; i < n; i++ {
		at := Epoch.Add(time.Duration(int64(w.s.sc.Arrival) * int64(i) / int64(n)))
		w.s.at(at, func() { w.arrive(i) })
	}
}

// arrive creates the i-th pod of the scenario from a template drawn by weight.
func (w *World) arrive(i int) {
	w.created++
	t := w.s.pickTemplate()
	w.createPod(fmt.Sprintf("%s-%d", t.Name, i), t)
}

func (w *World) createPod(name string, t *Template) {
	n := w.s.pickNode(placement(t.Platform, t.Virtual))
	w.uids++
	uid := types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", w.uids, w.uids))
	pod := w.admitNative(w.s.buildPod(name, uid, n.name, t), n, t)
	pod.ResourceVersion = w.nextRV()
	pod.CreationTimestamp = metav1.NewTime(w.s.now())
	e := &podEntry{obj: pod, node: n, tmpl: t, truth: newTruth(t, pod)}
	w.pods[e.key()] = e
	w.byUID[uid] = e
	w.s.check.podCreated(e)
	w.s.trace.add(name, "created uid=%s rv=%s node=%s template=%s", uid[:8], pod.ResourceVersion, n.name, t.Name)
	w.publishPod(e, nil)
	w.s.after(w.s.jitter(n.kubeletLag, 0.5), func() { w.s.kubeletAdmit(e) })
	if !t.DeleteAt.zero() {
		w.s.after(w.s.draw(t.DeleteAt), func() { w.deletePod(e, "scheduled deletion") })
	}
}

// setPodStatus publishes the kubelet's status: a terminal phase stays (the
// kubelet never moves a pod out of Succeeded or Failed, whoever set it), and
// conditions others wrote are kept.
func (w *World) setPodStatus(e *podEntry, st corev1.PodStatus) {
	old := e.obj
	if old.Status.Phase == corev1.PodSucceeded || old.Status.Phase == corev1.PodFailed {
		st.Phase = old.Status.Phase
	}
	st.Conditions = old.Status.Conditions
	pod := *old
	pod.Status = st
	pod.ResourceVersion = w.nextRV()
	e.obj = &pod
	w.publishPod(e, old)
}

// replacePod stores a patched pod.
func (w *World) replacePod(e *podEntry, pod *corev1.Pod) {
	old := e.obj
	pod.ResourceVersion = w.nextRV()
	e.obj = pod
	w.publishPod(e, old)
}

// deletePod starts a graceful deletion; the kubelet removes the pod once its
// containers have stopped.
func (w *World) deletePod(e *podEntry, why string) {
	if e.gone || e.obj.DeletionTimestamp != nil {
		return
	}
	pod := *e.obj
	ts := metav1.NewTime(w.s.now())
	pod.DeletionTimestamp = &ts
	w.s.trace.add(pod.Name, "deleting (%s)", why)
	w.replacePod(e, &pod)
	if e.rt == nil {
		w.removePod(e)
		return
	}
	e.rt.Delete(w.s.now())
	w.s.kubeletSync(e)
}

// removePod drops the pod object and garbage-collects its CRRs.
func (w *World) removePod(e *podEntry) {
	if e.gone {
		return
	}
	e.gone = true
	e.rt = nil // the containers are gone; the truth stays for the report
	key := e.key()
	if w.pods[key] == e {
		delete(w.pods, key)
	}
	w.rv++
	w.s.trace.add(e.obj.Name, "removed")
	w.s.check.podGone(e)
	for _, c := range w.s.ctrls {
		c.observePod(key, e.obj, true)
	}
	w.s.after(2*time.Second, func() { w.gcCRRs(e.obj.UID) })
	if e.tmpl.Recreate && !e.truth.recreated {
		t := *e.tmpl
		t.Recreate, t.DeleteAt, t.DeleteAfterMainsDone = false, Range{}, Range{}
		w.createPod(e.obj.Name, &t)
	}
}

func (w *World) publishPod(e *podEntry, old *corev1.Pod) {
	for _, c := range w.s.ctrls {
		c.observePod(e.key(), e.obj, false)
	}
	w.s.check.podChanged(e, old)
	w.s.daemonPodChanged(e)
	w.s.kruiseTerminatorPodChanged(e)
	if old != nil && !terminalPhase(old.Status.Phase) && terminalPhase(e.obj.Status.Phase) && e.rt != nil && !e.rt.Terminal() {
		// Someone else (the controller settling the phase) finished the pod.
		if !e.truth.writtenBack && w.s.chance(w.s.sc.Faults.KubeletPhaseWriteBack) {
			e.truth.writtenBack = true
			w.s.after(w.s.jitter(e.node.kubeletLag, 0.5), func() { w.s.kubeletWriteBack(e) })
			return
		}
		if e.node.runsOnWhenTerminal {
			// virtual-kubelet neither syncs nor stops a pod whose phase is
			// terminal (node/pod.go, shouldSkipPodStatusUpdate, v1.14.1);
			// the provider runs it on until the pod is deleted.
			w.s.trace.add(e.obj.Name, "node %s runs the pod on in phase %s", e.node.name, e.obj.Status.Phase)
			return
		}
		w.s.after(w.s.jitter(e.node.kubeletLag, 0.5), func() { w.s.kubeletSeeFinished(e) })
	}
}

func terminalPhase(p corev1.PodPhase) bool { return p == corev1.PodSucceeded || p == corev1.PodFailed }

func (w *World) publishCRR(crr *kruisev1alpha1.ContainerRecreateRequest, deleted bool) {
	for _, c := range w.s.ctrls {
		c.observeCRR(crr, deleted)
	}
}

func (w *World) gcCRRs(uid types.UID) {
	for _, key := range w.crrsOf[uid] {
		w.deleteCRR(key, "owner pod gone")
	}
	delete(w.crrsOf, uid)
}

func (w *World) deleteCRR(key cache.ObjectName, why string) {
	crr, ok := w.crrs[key]
	if !ok {
		return
	}
	delete(w.crrs, key)
	w.rv++
	w.s.trace.add(crr.Spec.PodName, "crr %s deleted (%s)", crr.Name, why)
	w.publishCRR(crr, true)
	w.s.daemonNext(crr)
}

// crrIs reports whether the CRR stored under key is the one with this UID
// (Sim.afterForCRR).
func (w *World) crrIs(key cache.ObjectName, uid types.UID) bool {
	crr := w.crrs[key]
	return crr != nil && crr.UID == uid
}

// updateCRR stores a new version of a CRR.
func (w *World) updateCRR(crr *kruisev1alpha1.ContainerRecreateRequest) {
	crr.ResourceVersion = w.nextRV()
	w.crrs[cache.ObjectName{Namespace: crr.Namespace, Name: crr.Name}] = crr
	w.publishCRR(crr, false)
}
