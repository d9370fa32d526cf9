package app

import (
	"context"
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/kube"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// The reconciler the controller runs reads live from the API server, and
// its writes reach the counter the events give way to. A failed pod of a
// Job whose podFailurePolicy reads every container's exit code needs the
// Job's rule before its sidecar is stopped: the Job is read (one GET at the
// API server) and the sidecar stopped by the image swap instead of a CRR,
// whose exit the rule would read. A wiring that lost the live reads fails
// the sync or never reads the Job; when the reads were found on the Writer
// by type assertion, a wrapper of the writer hid them, and the binary read
// nothing live for days while every test of the reconciler passed.
func TestTheControllersReconcilerReadsLive(t *testing.T) {
	pod := podtest.Pod("p").Namespace("default").UID("p-uid").Node("normal").OwnedByJob("j").
		Container("main", podtest.Exited(1, time.Now().Add(-time.Second))).
		Container("proxy", podtest.Env(decision.EnvTerminate, "true"), podtest.Env(decision.EnvTerminateWithImage, quickExitImage), podtest.Running()).Build()
	var jobUID types.UID
	for _, o := range pod.OwnerReferences {
		jobUID = o.UID
	}
	notIn := batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{0, 1}}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "j", UID: jobUID},
		Spec: batchv1.JobSpec{PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
			{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &notIn}}}}}
	b := newBinary(t, pod, []runtime.Object{job}, nil)
	b.sync(t)
	if got := calls(b.client.Actions()); got != "get jobs,patch pods" {
		t.Errorf("API calls %q, want the Job read live, then the swap", got)
	}
	if len(b.kruise.Actions()) != 0 {
		t.Errorf("CRR calls %v, want none: the rule reads a CRR's exit", b.kruise.Actions())
	}
	if n := b.writer.recent(); n != 1 {
		t.Errorf("%d writes counted for the events, want the swap", n)
	}
}

// binary is the reconciler as the controller's binary wires it
// (newReconciler), over the caches it runs on and fake API servers.
type binary struct {
	client *fake.Clientset
	kruise *kruisefake.Clientset
	caches *kube.Caches
	rec    *reconciler.Reconciler
	writer *lastWrite
	events *record.FakeRecorder
}

// newBinary wires the controller's reconciler for one pod on the normal
// node "normal"; objs are the other objects of the API server, crrs those
// of its CRR API. setup runs on the caches before the reconciler is built.
func newBinary(t *testing.T, pod *corev1.Pod, objs, crrs []runtime.Object, setup ...func(*kube.Caches)) *binary {
	t.Helper()
	b := &binary{client: fake.NewClientset(append([]runtime.Object{pod.DeepCopy()}, objs...)...),
		kruise: kruisefake.NewSimpleClientset(crrs...), events: record.NewFakeRecorder(100)}
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var err error
	if b.caches, err = kube.NewCaches(b.client, metadatafake.NewSimpleMetadataClient(scheme), b.kruise, true); err != nil {
		t.Fatal(err)
	}
	trimmed, _ := kube.CachePod(pod.DeepCopy())
	if err := b.caches.PodInformer.GetIndexer().Add(trimmed); err != nil {
		t.Fatal(err)
	}
	if err := b.caches.NodeInformer.GetIndexer().Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "normal"}}); err != nil {
		t.Fatal(err)
	}
	for _, f := range setup {
		f(b.caches)
	}
	cfg := reconciler.DefaultConfig()
	cfg.Policy.AllowedQuickExitImages = []string{quickExitImage}
	b.rec, b.writer = newReconciler(cfg, b.caches, kube.Writer{Client: b.client, Kruise: b.kruise}, b.events, reconciler.NewMetrics(nil))
	// The write counter counts by wall-clock second: frozen, so that a slow
	// run (a loaded machine) does not age a write out before it is checked.
	frozen := time.Now()
	b.writer.now = func() time.Time { return frozen }
	b.client.ClearActions()
	b.kruise.ClearActions()
	return b
}

func (b *binary) sync(t *testing.T) {
	t.Helper()
	if _, err := b.rec.Sync(context.Background(), cache.ObjectName{Namespace: "default", Name: "p"}); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

// calls lists the calls a fake API server was sent, as "verb resource".
func calls(actions []k8stesting.Action) string {
	var out []string
	for _, a := range actions {
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	return strings.Join(out, ",")
}

const quickExitImage = "ghcr.io/sidecar-terminator/quick-exit:v1"

// donePod is a pod on the normal node whose main exited 0 a minute ago and
// whose sidecar, to stop by CRR, has the quick-exit image as a fallback.
func donePod() *corev1.Pod {
	return podtest.Pod("p").Namespace("default").UID("p-uid").Node("normal").
		Container("main", podtest.Exited(0, time.Now().Add(-time.Minute))).
		Container("proxy", podtest.Env(decision.EnvTerminate, "true"), podtest.Env(decision.EnvTerminateWithImage, quickExitImage), podtest.Running()).Build()
}

// The controller's reconciler knows which nodes run kruise-daemon from its
// NodeImage cache: on a node whose NodeImage kruise-daemon never wrote, a
// sidecar with a quick-exit image is swapped, with no CRR that no daemon
// would carry out. A wiring whose Reader lost the daemons (as a wrapper
// hiding a method found by type assertion once did) would make the CRR.
func TestTheControllersReconcilerKnowsWhichNodesRunKruiseDaemon(t *testing.T) {
	noDaemon := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "normal",
		CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour)),
		ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kruise-manager", Operation: metav1.ManagedFieldsOperationUpdate}}}}
	b := newBinary(t, donePod(), nil, nil, func(c *kube.Caches) {
		if err := c.WatchNodeImages(); err != nil {
			t.Fatal(err)
		}
		if err := c.NodeImageInformer.GetIndexer().Add(noDaemon); err != nil {
			t.Fatal(err)
		}
	})
	b.sync(t)
	if got := calls(b.client.Actions()); got != "patch pods" {
		t.Errorf("API calls %q, want the image swap", got)
	}
	if got := calls(b.kruise.Actions()); got != "" {
		t.Errorf("CRR calls %q, want none on a node no kruise-daemon serves", got)
	}
}

// The controller's reconciler reads OpenKruise's own SidecarTerminator's
// CRR live where its plan looks for it: once that terminator is known to
// act in the cluster, a pod's first CRR looks first, finds kruise's CRR
// stopping the sidecar, and yields to it with a Warning instead of making a
// second. A wiring whose live reads lost that read would make the CRR.
func TestTheControllersReconcilerReadsKruisesTerminatorLive(t *testing.T) {
	pod := donePod()
	theirs := &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{
		Name: decision.KruiseTerminatorCRRName(pod), Namespace: "default", CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Second)),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: pod.UID}}},
		Spec:   kruisev1alpha1.ContainerRecreateRequestSpec{PodName: "p", Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "proxy"}}},
		Status: kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestRecreating}}
	b := newBinary(t, pod, nil, []runtime.Object{theirs})
	b.rec.KruiseTerminatorSeen()
	b.sync(t)
	if got := calls(b.kruise.Actions()); got != "get containerrecreaterequests" {
		t.Errorf("CRR calls %q, want kruise's CRR read live and no CRR made beside it", got)
	}
	if got := calls(b.client.Actions()); got != "" {
		t.Errorf("API calls %q, want none: kruise's CRR stops the sidecar", got)
	}
	var events []string
	for len(b.events.Events) > 0 {
		events = append(events, <-b.events.Events)
	}
	if !strings.Contains(strings.Join(events, "\n"), "Warning "+decision.ReasonSecondTerminator) {
		t.Errorf("events %q, want a %s Warning", events, decision.ReasonSecondTerminator)
	}
}

// The controller's reconciler asks its caches to look for the CRR API again
// when a CRR create answers 404 (OpenKruise's CRD removed while it ran), so
// the next pods get the image swap at once, not after discovery's next
// round (crrAPIDiscoveryPeriod). A wiring whose Reader lost the ask would
// keep the CRR API on until then.
func TestTheControllersReconcilerLooksForTheCRRAPIAgainOnA404(t *testing.T) {
	b := newBinary(t, donePod(), nil, nil)
	b.kruise.PrependReactor("create", "containerrecreaterequests", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(kruisev1alpha1.Resource("containerrecreaterequests"), "")
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	defer func() { cancel(); <-done }()
	// Discovery, as the fake API server answers it: the CRR API is not
	// served. Its period is far beyond the test: only the ask runs it.
	go func() { defer close(done); b.caches.DiscoverCRRAPI(ctx, b.client.Discovery(), time.Hour) }()
	b.sync(t)
	if got := calls(b.kruise.Actions()); !strings.HasPrefix(got, "create containerrecreaterequests") {
		t.Fatalf("CRR calls %q, want the create that answers 404", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.caches.CRRAPIAvailable() {
		if time.Now().After(deadline) {
			t.Fatal("the CRR API is still taken as served: discovery was not asked again after the 404")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
