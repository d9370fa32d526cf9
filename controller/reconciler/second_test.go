package reconciler_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// withKruise adds to the in-memory API server the CRRs OpenKruise's own
// SidecarTerminator makes, which the reconciler's CRR list (ours only) never
// shows, and counts the reads of them.
type withKruise struct {
	*apiFake
	kruise map[string]*kruisev1alpha1.ContainerRecreateRequest
	gets   int
}

func (w *withKruise) KruiseTerminatorCRR(_ context.Context, pod *corev1.Pod) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	w.gets++
	return w.kruise[decision.KruiseTerminatorCRRName(pod)], nil
}

// kruiseActs makes kruise's CRR for the pod, as kill_container_action.go
// does (github.com/openkruise/kruise v1.9.1): named after the pod's UID,
// owned by the pod, no labels.
func (w *withKruise) kruiseActs(pod *corev1.Pod, containers ...string) {
	crr := &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{
		Name: decision.KruiseTerminatorCRRName(pod), Namespace: pod.Namespace, CreationTimestamp: metav1.NewTime(w.clock.Now()),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}},
		Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: pod.Name}}
	for _, c := range containers {
		crr.Spec.Containers = append(crr.Spec.Containers, kruisev1alpha1.ContainerRecreateRequestContainer{Name: c})
	}
	crr.Status.Phase = kruisev1alpha1.ContainerRecreateRequestRecreating
	w.kruise[crr.Name] = crr
}

func newKruiseAPI(t *testing.T, pods ...*corev1.Pod) (*withKruise, *reconciler.Reconciler, *reconciler.Metrics) {
	a, _, m := newAPI(t, pods...)
	w := &withKruise{apiFake: a, kruise: map[string]*kruisev1alpha1.ContainerRecreateRequest{}}
	return w, reconciler.New(reconciler.DefaultConfig(), w, a, w, a, m, a.clock), m
}

func (a *apiFake) setCRRPhase(name string, phase kruisev1alpha1.ContainerRecreateRequestPhase) {
	for _, c := range a.crrs {
		if c.Name == name {
			c.Status.Phase = phase
		}
	}
	a.catchUp()
}

func countEvents(a *apiFake, event string) int {
	n := 0
	for _, e := range a.events {
		if e == event {
			n++
		}
	}
	return n
}

// Without OpenKruise's terminator, looking for it costs nothing: no read
// beyond the controller's own cache, however the pod goes.
func TestNoSecondTerminatorCostsNoRead(t *testing.T) {
	w, rec, m := newKruiseAPI(t, donePod("p", "normal", markCRR))
	mustSync(t, rec, "p")
	w.catchUp()
	w.setCRRPhase(decision.CRRName(w.pods["p"], 1), kruisev1alpha1.ContainerRecreateRequestRecreating)
	w.clock.Step(time.Second)
	mustSync(t, rec, "p")
	if w.gets != 0 || strings.Join(w.writes, ",") != "crr" || testutil.ToFloat64(m.SecondTerminatorPods) != 0 {
		t.Errorf("happy path: %d reads of kruise's CRR, writes %v, %v second-terminator pods; want 0, [crr], 0",
			w.gets, w.writes, testutil.ToFloat64(m.SecondTerminatorPods))
	}
}

// kruise-daemon keeps our CRR Pending behind kruise's own: that signal makes
// the reconciler read kruise's CRR once, warn once, count the pod, and make
// no second CRR for the sidecar kruise stops. From then on, a pod's first
// CRR waits for kruise's CRR to show and is not made when it does.
func TestSecondTerminatorIsNoticedAndYieldedTo(t *testing.T) {
	p1, p2 := donePod("p1", "normal", markCRR), donePod("p2", "normal", markCRR)
	w, rec, m := newKruiseAPI(t, p1, p2)
	w.kruiseActs(p1, "log")
	mustSync(t, rec, "p1") // our CRR, made before we could know
	w.catchUp()
	w.setCRRPhase(decision.CRRName(p1, 1), kruisev1alpha1.ContainerRecreateRequestPending)
	for i := 0; i < 3; i++ {
		w.clock.Step(time.Second)
		mustSync(t, rec, "p1")
	}
	if w.gets != 1 {
		t.Errorf("kruise's CRR read %d times, want once", w.gets)
	}
	if n := countEvents(w.apiFake, "Warning "+decision.ReasonSecondTerminator); n != 1 {
		t.Errorf("%d SecondTerminator Warnings, want 1 (events %v)", n, w.events)
	}
	if got := testutil.ToFloat64(m.SecondTerminatorPods); got != 1 {
		t.Errorf("second-terminator pods %v, want 1", got)
	}

	// The second pod: kruise is known to act in this cluster.
	w.clock.SetTime(p2.Status.ContainerStatuses[0].State.Terminated.FinishedAt.Add(time.Second))
	if after := mustSync(t, rec, "p2"); after <= 0 || after > decision.SecondTerminatorGrace {
		t.Errorf("first CRR of p2 should wait up to %s for kruise's; requeue %s", decision.SecondTerminatorGrace, after)
	}
	w.kruiseActs(p2, "log")
	w.clock.Step(decision.SecondTerminatorGrace)
	mustSync(t, rec, "p2")
	if got := strings.Join(w.writes, ","); got != "crr" {
		t.Errorf("writes %s: a second CRR was made for a sidecar kruise's CRR stops", got)
	}
	if n := countEvents(w.apiFake, "Warning "+decision.ReasonSecondTerminator); n != 2 || testutil.ToFloat64(m.SecondTerminatorPods) != 2 {
		t.Errorf("p2 not warned about or counted: events %v", w.events)
	}

	// The third pod: kruise's CRR is there before the controller's first
	// look, which finds it during the wait; its kill may be over before
	// the wait ends, and the pod is still warned about.
	p3 := podtest.Pod("p3").Namespace("default").UID("p3-uid-1").Node("normal").
		Container("main", podtest.Exited(0, w.clock.Now())).Container("log", markCRR).Build()
	w.pods["p3"] = p3
	w.catchUp()
	w.kruiseActs(p3, "log")
	gets := w.gets
	if after := mustSync(t, rec, "p3"); after <= decision.SecondTerminatorGrace {
		t.Errorf("p3: requeue %s; found during the wait, kruise's CRR has its time (a minute), not the wait's", after)
	}
	if w.gets != gets+1 || countEvents(w.apiFake, "Warning "+decision.ReasonSecondTerminator) != 3 {
		t.Errorf("p3: %d reads during the wait, events %v; want one read and a Warning", w.gets-gets, w.events)
	}
	if got := strings.Join(w.writes, ","); got != "crr" {
		t.Errorf("writes %s: a CRR was made for p3", got)
	}

	// The fourth pod: kruise's CRR shows only after the controller's first
	// look, and its kill is over before the wait ends. Looking once more
	// when the wait is over finds it: the pod is warned about all the same.
	p4 := podtest.Pod("p4").Namespace("default").UID("p4-uid-1").Node("normal").
		Container("main", podtest.Exited(0, w.clock.Now())).Container("log", markCRR).Build()
	w.pods["p4"] = p4
	w.catchUp()
	mustSync(t, rec, "p4")
	w.kruiseActs(p4, "log")
	stopped := p4.DeepCopy()
	stopped.Status.ContainerStatuses[1] = *podtest.Pod("x").Container("log", podtest.Exited(0, w.clock.Now())).Build().Status.ContainerStatuses[0].DeepCopy()
	w.pods["p4"] = stopped
	w.catchUp()
	w.clock.Step(time.Second)
	mustSync(t, rec, "p4")
	if n := countEvents(w.apiFake, "Warning "+decision.ReasonSecondTerminator); n != 4 || strings.Join(w.writes, ",") != "crr" {
		t.Errorf("p4: %d SecondTerminator Warnings in all (want 4), writes %v", n, w.writes)
	}
}

// When OpenKruise's terminator is noticed on a pod, the log line that says
// the controller yields names kruise's CRR.
func TestYieldingToKruiseLogsItsCRR(t *testing.T) {
	p1 := donePod("p1", "normal", markCRR)
	w, rec, _ := newKruiseAPI(t, p1)
	w.kruiseActs(p1, "log")
	var buf bytes.Buffer
	ctx := klog.NewContext(context.Background(), textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf))))
	key := cache.ObjectName{Namespace: "default", Name: "p1"}
	if _, err := rec.Sync(ctx, key); err != nil {
		t.Fatal(err)
	}
	w.catchUp()
	w.setCRRPhase(decision.CRRName(p1, 1), kruisev1alpha1.ContainerRecreateRequestPending)
	w.clock.Step(time.Second)
	if _, err := rec.Sync(ctx, key); err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "yields to it") {
			line = l
		}
	}
	if want := fmt.Sprintf("kruiseCRR=%q", decision.KruiseTerminatorCRRName(p1)); !strings.Contains(line, want) {
		t.Errorf("log line %q, want %s", line, want)
	}
}

// explain looks for OpenKruise's own terminator's CRR whatever the signals
// say (a sync reads it only when our CRR waits behind it), and reports it.
func TestExplainLooksForKruisesTerminator(t *testing.T) {
	for _, kruiseActs := range []bool{true, false} {
		pod := donePod("p", "normal", markCRR)
		w, rec, _ := newKruiseAPI(t, pod)
		if kruiseActs {
			w.kruiseActs(pod, "log")
		}
		plan, err := rec.ExplainPlan(w.cachedPods["p"], w.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if w.gets != 1 {
			t.Errorf("kruise acts %v: %d reads of kruise's CRR, want 1", kruiseActs, w.gets)
		}
		if got := plan.SecondTerminator != nil && plan.SecondTerminator.CRR == decision.KruiseTerminatorCRRName(pod); got != kruiseActs {
			t.Errorf("kruise acts %v: plan's second terminator %+v", kruiseActs, plan.SecondTerminator)
		}
	}
}

// Once OpenKruise's terminator is known to act in the cluster, a pod's first
// CRR (past the wait for kruise's CRR: the mains ended long ago) looks for
// kruise's CRR once first: one there is warned about and counted.
func TestAFirstCRRLooksForKruisesOnceKruiseIsKnown(t *testing.T) {
	for _, kruiseActs := range []bool{true, false} {
		pod := donePod("p", "normal", markCRR)
		w, rec, m := newKruiseAPI(t, pod)
		rec.KruiseTerminatorSeen()
		if kruiseActs {
			w.kruiseActs(pod, "log")
		}
		w.clock.Step(decision.SecondTerminatorGrace + time.Minute)
		mustSync(t, rec, "p")
		warned := countEvents(w.apiFake, "Warning "+decision.ReasonSecondTerminator) == 1 && testutil.ToFloat64(m.SecondTerminatorPods) == 1
		if w.gets != 1 || warned != kruiseActs {
			t.Errorf("kruise acts %v: %d reads of kruise's CRR, warned and counted %v (events %v); want 1 read, %v", kruiseActs, w.gets, warned, w.events, kruiseActs)
		}
	}
}

// liveAPI is apiFake with an API server to read from directly, whose
// answers the test sets: a CRR by name (nil: not found), the pod.
type liveAPI struct {
	*apiFake
	crrs    map[string]*kruisev1alpha1.ContainerRecreateRequest
	crrErr  error
	pod     *corev1.Pod
	podErr  error
	podGets int
}

func (l *liveAPI) LiveCRR(_ context.Context, _, name string) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	if l.crrErr != nil {
		return nil, l.crrErr
	}
	if c := l.crrs[name]; c != nil {
		return c, nil
	}
	return nil, apierrors.NewNotFound(kruisev1alpha1.Resource("containerrecreaterequests"), name)
}

func (l *liveAPI) LivePod(context.Context, string, string) (*corev1.Pod, error) {
	l.podGets++
	if l.podErr != nil {
		return nil, l.podErr
	}
	if l.pod == nil {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p")
	}
	return l.pod, nil
}
