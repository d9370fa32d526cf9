package kube

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

const quickExit = "ghcr.io/sidecar-terminator/quick-exit:v1"

// fixture is the sample-controller test shape: fake clientsets for writes,
// informer indexers seeded by hand for reads, Sync called directly.
type fixture struct {
	t       *testing.T
	client  *fake.Clientset
	kruise  *kruisefake.Clientset
	caches  *Caches
	events  *record.FakeRecorder
	clock   *clocktesting.FakeClock
	rec     *reconciler.Reconciler
	metrics *reconciler.Metrics
}

func newFixture(t *testing.T, pods []*corev1.Pod, nodes map[string]map[string]string) *fixture {
	f := &fixture{t: t, events: record.NewFakeRecorder(100), clock: clocktesting.NewFakeClock(podtest.Epoch.Add(11 * time.Second))}
	var objs []runtime.Object
	for _, p := range pods {
		objs = append(objs, p.DeepCopy())
	}
	f.client = fake.NewClientset(objs...)
	f.kruise = kruisefake.NewSimpleClientset()
	scheme := runtime.NewScheme()
	metav1.AddMetaToScheme(scheme)
	caches, err := NewCaches(f.client, metadatafake.NewSimpleMetadataClient(scheme), f.kruise, true)
	if err != nil {
		t.Fatal(err)
	}
	f.caches = caches
	for _, p := range pods {
		f.setPod(p)
	}
	for name, l := range nodes {
		caches.NodeInformer.GetIndexer().Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}})
	}
	f.newReconciler()
	return f
}

// newReconciler starts a fresh reconciler, as after a controller restart.
func (f *fixture) newReconciler() {
	f.metrics = reconciler.NewMetrics(nil)
	f.rec = reconciler.New(reconciler.DefaultConfig(), f.caches, Writer{Client: f.client, Kruise: f.kruise}, Writer{Client: f.client, Kruise: f.kruise}, f.events, f.metrics, f.clock)
}

func (f *fixture) setPod(p *corev1.Pod) {
	trimmed, _ := CachePod(p.DeepCopy())
	if err := f.caches.PodInformer.GetIndexer().Update(trimmed); err != nil {
		f.t.Fatal(err)
	}
}

// sync runs one Sync and returns the writes it made (reads aside).
func (f *fixture) sync(name string) []k8stesting.Action {
	f.t.Helper()
	f.client.ClearActions()
	f.kruise.ClearActions()
	if _, err := f.rec.Sync(context.Background(), cache.ObjectName{Namespace: "default", Name: name}); err != nil {
		f.t.Fatalf("Sync: %v", err)
	}
	var writes []k8stesting.Action
	for _, a := range append(f.client.Actions(), f.kruise.Actions()...) {
		switch a.GetVerb() {
		case "get", "list", "watch":
		default:
			writes = append(writes, a)
		}
	}
	return writes
}

func (f *fixture) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

var (
	normalNode  = map[string]map[string]string{"node-1": {"kubernetes.io/hostname": "node-1"}}
	virtualNode = map[string]map[string]string{"node-1": {"type": "virtual-kubelet"}}
)

func jobPod(name string, sidecarOpts ...podtest.Option) *podtest.Builder {
	return podtest.Pod(name).Container("main", podtest.Exited(0, podtest.Epoch.Add(10*time.Second))).Container("log", sidecarOpts...)
}

func TestSyncCreatesOneCRROnANormalNode(t *testing.T) {
	pod := jobPod("job-a", podtest.Env(decision.EnvTerminate, "true")).Build()
	f := newFixture(t, []*corev1.Pod{pod}, normalNode)

	writes := f.sync("job-a")
	if len(writes) != 1 || writes[0].GetVerb() != "create" || writes[0].GetResource().Resource != "containerrecreaterequests" {
		t.Fatalf("want exactly one CRR create, got %v", writes)
	}
	crr := writes[0].(k8stesting.CreateAction).GetObject().(*kruisev1alpha1.ContainerRecreateRequest)
	deadline, ttl, grace := int64(60), int32(1800), int64(30)
	want := kruisev1alpha1.ContainerRecreateRequestSpec{
		PodName:    "job-a",
		Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "log"}},
		Strategy: &kruisev1alpha1.ContainerRecreateRequestStrategy{
			FailurePolicy: kruisev1alpha1.ContainerRecreateRequestFailurePolicyIgnore, ForceRecreate: true,
			TerminationGracePeriodSeconds: &grace},
		ActiveDeadlineSeconds: &deadline, TTLSecondsAfterFinished: &ttl,
	}
	if diff := cmp.Diff(want, crr.Spec); diff != "" {
		t.Errorf("CRR spec (-want +got):\n%s", diff)
	}
	if crr.Name != decision.CRRName(pod, 1) || crr.Labels[reconciler.LabelManagedBy] != reconciler.ManagedByValue ||
		crr.Labels[reconciler.LabelPodUID] != string(pod.UID) || crr.Labels[reconciler.LabelAttempt] != "1" {
		t.Errorf("CRR name or labels wrong: %s %v", crr.Name, crr.Labels)
	}
	if len(crr.OwnerReferences) != 1 || crr.OwnerReferences[0].UID != pod.UID || crr.OwnerReferences[0].Kind != "Pod" {
		t.Errorf("CRR owner reference wrong: %v", crr.OwnerReferences)
	}
	if ev := f.drainEvents(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal SidecarTerminating") {
		t.Errorf("want one SidecarTerminating event, got %q", ev)
	}

	// The cache has not seen the CRR yet: the expectation holds back a second one.
	if writes := f.sync("job-a"); len(writes) != 0 {
		t.Fatalf("second sync with a lagging cache wrote %v", writes)
	}
	// The cache catches up: still nothing to write while the CRR works.
	created, _ := f.kruise.AppsV1alpha1().ContainerRecreateRequests("default").Get(context.Background(), crr.Name, metav1.GetOptions{})
	created.CreationTimestamp = metav1.NewTime(f.clock.Now())
	f.caches.CRRInformer.GetIndexer().Add(cacheCRR(created))
	if writes := f.sync("job-a"); len(writes) != 0 {
		t.Fatalf("sync with the CRR in the cache wrote %v", writes)
	}
	// The sidecar stops: done, nothing written.
	f.setPod(jobPod("job-a", podtest.Env(decision.EnvTerminate, "true"), podtest.Exited(0, f.clock.Now())).Build())
	if writes := f.sync("job-a"); len(writes) != 0 {
		t.Fatalf("sync after the sidecar stopped wrote %v", writes)
	}
}

func TestSyncAfterRestartDoesNotCreateASecondCRR(t *testing.T) {
	pod := jobPod("job-b", podtest.Env(decision.EnvTerminate, "true")).Build()
	f := newFixture(t, []*corev1.Pod{pod}, normalNode)
	f.sync("job-b")
	// A new controller whose CRR informer has not caught up: it tries the same
	// deterministic name and finds the work done.
	f.newReconciler()
	writes := f.sync("job-b")
	if len(writes) != 1 || writes[0].GetVerb() != "create" {
		t.Fatalf("want the one idempotent create attempt, got %v", writes)
	}
	list, _ := f.kruise.AppsV1alpha1().ContainerRecreateRequests("default").List(context.Background(), metav1.ListOptions{})
	if len(list.Items) != 1 {
		t.Fatalf("want 1 CRR on the server, got %d", len(list.Items))
	}
	if got := counterValue(t, f.metrics, "ContainerRecreateRequest", reconciler.ResultAlreadyDone); got != 1 {
		t.Errorf("already_done count = %v, want 1", got)
	}
}

// A CRR someone else made under our deterministic name is not our work
// done: the pod gets a Warning naming it, the metrics count an error, and
// the create is not retried in a loop (a permanent refusal: once more after
// the short backoff, once after the long one, then given up).
func TestSyncDoesNotTakeAForeignCRRUnderItsNameForItsOwn(t *testing.T) {
	pod := jobPod("job-f", podtest.Env(decision.EnvTerminate, "true")).Build()
	for name, labels := range map[string]map[string]string{
		"no managed-by label": {reconciler.LabelPodUID: string(pod.UID)},
		"another pod's UID":   {reconciler.LabelManagedBy: reconciler.ManagedByValue, reconciler.LabelPodUID: "someone-else"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, []*corev1.Pod{pod}, normalNode)
			foreign := &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{
				Namespace: "default", Name: decision.CRRName(pod, 1), Labels: labels},
				Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: "job-f"}}
			if _, err := f.kruise.AppsV1alpha1().ContainerRecreateRequests("default").Create(context.Background(), foreign, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			writes := f.sync("job-f")
			if len(writes) != 1 || writes[0].GetVerb() != "create" {
				t.Fatalf("want the one create attempt, got %v", writes)
			}
			ev := f.drainEvents()
			if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+decision.ReasonSidecarKillFailed) || !strings.Contains(ev[0], "not this controller's") {
				t.Errorf("want one Warning naming the foreign CRR, got %q", ev)
			}
			if got := counterValue(t, f.metrics, "ContainerRecreateRequest", reconciler.ResultAlreadyDone); got != 0 {
				t.Errorf("foreign CRR counted as already done (%v)", got)
			}
			if got := counterValue(t, f.metrics, "ContainerRecreateRequest", reconciler.ResultError); got != 1 {
				t.Errorf("error count = %v, want 1", got)
			}
			// Asked once more after the short backoff, meeting the same CRR;
			// then nothing within the long backoff.
			f.clock.Step(decision.DefaultPolicy().RetryBackoff)
			if writes := f.sync("job-f"); len(writes) != 1 || writes[0].GetVerb() != "create" {
				t.Errorf("want the one confirming create after the short backoff, got %v", writes)
			}
			f.clock.Step(time.Minute)
			if writes := f.sync("job-f"); len(writes) != 0 {
				t.Errorf("refused create sent again within the long backoff: %v", writes)
			}
		})
	}
}

func TestSyncSwapsTheImageOnAVirtualNode(t *testing.T) {
	pod := jobPod("job-c", podtest.Env(decision.EnvTerminateWithImage, quickExit)).Build()
	f := newFixture(t, []*corev1.Pod{pod}, virtualNode)

	writes := f.sync("job-c")
	if len(writes) != 1 || writes[0].GetVerb() != "patch" || writes[0].GetSubresource() != "" {
		t.Fatalf("want exactly one pod patch, got %v", writes)
	}
	patch := writes[0].(k8stesting.PatchAction)
	var ops []map[string]any
	if err := json.Unmarshal(patch.GetPatch(), &ops); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": string(pod.UID)},
		{"op": "test", "path": "/spec/containers/1/name", "value": "log"},
		{"op": "test", "path": "/spec/containers/1/image", "value": "example.com/log:1"},
		{"op": "replace", "path": "/spec/containers/1/image", "value": quickExit},
	}
	if string(patch.GetPatchType()) != "application/json-patch+json" || !cmp.Equal(want, ops) {
		t.Fatalf("patch %s %s, want %v", patch.GetPatchType(), patch.GetPatch(), want)
	}
	server, _ := f.client.CoreV1().Pods("default").Get(context.Background(), "job-c", metav1.GetOptions{})
	if server.Spec.Containers[1].Image != quickExit || server.Spec.Containers[0].Image != "example.com/main:1" {
		t.Fatalf("server images after the patch: %s, %s", server.Spec.Containers[0].Image, server.Spec.Containers[1].Image)
	}
	if writes := f.sync("job-c"); len(writes) != 0 {
		t.Fatalf("second sync with a lagging cache wrote %v", writes)
	}
	f.setPod(server)
	if writes := f.sync("job-c"); len(writes) != 0 {
		t.Fatalf("sync with the swap in the cache wrote %v", writes)
	}
	// After a restart the expectation is gone, but the cache shows the swap: no second patch.
	f.newReconciler()
	if writes := f.sync("job-c"); len(writes) != 0 {
		t.Fatalf("sync after restart wrote %v", writes)
	}
}

func TestSyncWritesNothingWhileTheMainRuns(t *testing.T) {
	pod := podtest.Pod("job-d").Container("main").Container("log", podtest.Env(decision.EnvTerminate, "true")).Build()
	f := newFixture(t, []*corev1.Pod{pod}, normalNode)
	if writes := f.sync("job-d"); len(writes) != 0 {
		t.Fatalf("wrote %v", writes)
	}
	if ev := f.drainEvents(); len(ev) != 0 {
		t.Fatalf("events %q", ev)
	}
}

func TestSyncSettlesThePhaseThenStopsIgnoreExitCodeSidecarsOnlyIfTheKubeletDoesNot(t *testing.T) {
	pod := jobPod("job-e", podtest.Env(decision.EnvTerminate, "true"), podtest.Env(decision.EnvIgnoreExitCode, "true")).
		Condition(corev1.PodReady, corev1.ConditionFalse).Build()
	f := newFixture(t, []*corev1.Pod{pod}, normalNode)
	writes := f.sync("job-e")
	if len(writes) != 2 || writes[0].GetSubresource() != "status" || writes[1].GetSubresource() != "" ||
		writes[1].(k8stesting.PatchAction).GetPatchType() != types.MergePatchType {
		t.Fatalf("want a status patch, then an annotation that wakes the kubelet, got %v", writes)
	}
	server, _ := f.client.CoreV1().Pods("default").Get(context.Background(), "job-e", metav1.GetOptions{})
	if server.Annotations[reconciler.AnnotationSettled] == "" {
		t.Errorf("no %s annotation", reconciler.AnnotationSettled)
	}
	if server.Status.Phase != corev1.PodSucceeded || !decision.HasSidecarTerminatedCondition(server) || len(server.Status.Conditions) != 2 {
		t.Fatalf("status after the patch: %s %v", server.Status.Phase, server.Status.Conditions)
	}
	// Settled: the kubelet has the pod's grace period to stop the sidecar.
	f.setPod(server)
	if writes := f.sync("job-e"); len(writes) != 0 {
		t.Fatalf("sync within the kubelet's grace period wrote %v", writes)
	}
	// It did not: the controller stops it.
	f.clock.Step(time.Minute)
	writes = f.sync("job-e")
	if len(writes) != 1 || writes[0].GetResource().Resource != "containerrecreaterequests" {
		t.Fatalf("want a CRR after the grace period, got %v", writes)
	}
}

func TestSyncWarnsOncePerProblem(t *testing.T) {
	pod := jobPod("job-f", podtest.Env(decision.EnvTerminate, "true")).Build()
	f := newFixture(t, []*corev1.Pod{pod}, virtualNode)
	for i := 0; i < 3; i++ {
		if writes := f.sync("job-f"); len(writes) != 0 {
			t.Fatalf("wrote %v", writes)
		}
	}
	ev := f.drainEvents()
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+decision.ReasonNoTerminationPath) {
		t.Fatalf("want one NoTerminationPath warning, got %q", ev)
	}
}

func TestSyncOfAMissingPodIsANoOp(t *testing.T) {
	f := newFixture(t, nil, normalNode)
	if writes := f.sync("gone"); len(writes) != 0 {
		t.Fatalf("wrote %v", writes)
	}
}

func TestTrimPodKeepsWhatTheDecisionReads(t *testing.T) {
	full := jobPod("job-g", podtest.Env(decision.EnvTerminate, "true"), podtest.Env("OTHER", "x")).GeneratedName("job-", "bcdfg").
		Annotate(decision.AnnotationSidecars, "log").Annotate("unrelated", "y").Build()
	full.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	full.Spec.Volumes = []corev1.Volume{{Name: "data"}}
	obj, _ := TrimPod(full.DeepCopy())
	trimmed := obj.(*corev1.Pod)
	in := func(p *corev1.Pod) decision.Input {
		return decision.Input{Pod: p, Node: decision.Node{Name: "node-1", Found: true}, CRRAPI: true, Now: podtest.Epoch.Add(time.Minute), Policy: decision.DefaultPolicy()}
	}
	if diff := cmp.Diff(decision.Decide(in(full)), decision.Decide(in(trimmed))); diff != "" {
		t.Errorf("the decision differs on the trimmed pod (-full +trimmed):\n%s", diff)
	}
	if trimmed.ManagedFields != nil || trimmed.Spec.Volumes != nil || len(trimmed.Spec.Containers[1].Env) != 1 || len(trimmed.Annotations) != 1 {
		t.Errorf("trim kept too much: %+v", trimmed)
	}
}

// A pod deleted and recreated under the same name while the cache still shows
// the old one: the swap's UID test fails, and the new pod is left alone.
func TestSwapNeverLandsOnANewPodOfTheSameName(t *testing.T) {
	old := jobPod("same-name", podtest.Env(decision.EnvTerminateWithImage, quickExit)).UID("old-uid").Build()
	f := newFixture(t, []*corev1.Pod{old}, virtualNode)
	replacement := podtest.Pod("same-name").UID("new-uid").Container("main").
		Container("log", podtest.Env(decision.EnvTerminateWithImage, quickExit)).Build()
	if err := f.client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), replacement, "default"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.rec.Sync(context.Background(), cache.ObjectName{Namespace: "default", Name: "same-name"}); err == nil {
		t.Fatalf("Sync patched a pod whose UID differs from the one decided on")
	}
	server, _ := f.client.CoreV1().Pods("default").Get(context.Background(), "same-name", metav1.GetOptions{})
	if server.Spec.Containers[1].Image == quickExit {
		t.Fatalf("the new pod's sidecar was swapped while its main runs")
	}
}

// The same for a CRR: kruise would resolve the name to the new pod, so the
// writer checks the pod's UID live and creates nothing.
func TestCRRNeverTargetsANewPodOfTheSameName(t *testing.T) {
	old := jobPod("same-name", podtest.Env(decision.EnvTerminate, "true")).UID("old-uid").Build()
	f := newFixture(t, []*corev1.Pod{old}, normalNode)
	replacement := podtest.Pod("same-name").UID("new-uid").Container("main").
		Container("log", podtest.Env(decision.EnvTerminate, "true")).Build()
	if err := f.client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), replacement, "default"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.rec.Sync(context.Background(), cache.ObjectName{Namespace: "default", Name: "same-name"}); err == nil {
		t.Fatalf("Sync created a CRR for a pod whose UID differs from the one decided on")
	}
	list, _ := f.kruise.AppsV1alpha1().ContainerRecreateRequests("default").List(context.Background(), metav1.ListOptions{})
	if len(list.Items) != 0 {
		t.Fatalf("a CRR was created: %v", list.Items[0].Name)
	}
	if got := counterValue(t, f.metrics, "ContainerRecreateRequest", reconciler.ResultStale); got != 1 {
		t.Errorf("stale count = %v, want 1", got)
	}
}

// A Job's pod has a generated name that no later pod takes: its CRR is one
// request, no live read. A chosen name is read first.
func TestCRRReadsThePodFirstOnlyWhenItsNameCanBeTakenAgain(t *testing.T) {
	for _, tc := range []struct {
		pod       *corev1.Pod
		wantReads int
	}{
		{jobPod("x", podtest.Env(decision.EnvTerminate, "true")).GeneratedName("report-", "x7k2p").OwnedByJob("report").Build(), 0},
		{jobPod("x", podtest.Env(decision.EnvTerminate, "true")).GeneratedName("bare-", "x7k2p").Build(), 1},
		{jobPod("report", podtest.Env(decision.EnvTerminate, "true")).Build(), 1},
	} {
		f := newFixture(t, []*corev1.Pod{tc.pod}, normalNode)
		writes := f.sync(tc.pod.Name)
		if len(writes) != 1 || writes[0].GetVerb() != "create" || writes[0].GetResource().Resource != "containerrecreaterequests" {
			t.Errorf("%s: writes %v, want one CRR create", tc.pod.Name, writes)
		}
		reads := 0
		for _, a := range f.client.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "pods" {
				reads++
			}
		}
		if reads != tc.wantReads {
			t.Errorf("%s (generateName %q): %d live pod reads, want %d", tc.pod.Name, tc.pod.GenerateName, reads, tc.wantReads)
		}
	}
}

func TestPodsTrackedGaugeFollowsPods(t *testing.T) {
	running := podtest.Pod("running").Container("main").Container("log", podtest.Env(decision.EnvTerminate, "true")).Build()
	plain := podtest.Pod("plain").Container("main").Build()
	f := newFixture(t, []*corev1.Pod{running, plain}, normalNode)
	gauge := func() float64 { return testutil.ToFloat64(f.metrics.PodsTracked) }
	f.sync("running")
	f.sync("plain")
	f.sync("running") // a second sync of the same pod counts it once
	if gauge() != 1 {
		t.Fatalf("pods tracked = %v, want 1", gauge())
	}
	if err := f.caches.PodInformer.GetIndexer().Delete(running); err != nil {
		t.Fatal(err)
	}
	f.sync("running")
	if gauge() != 0 {
		t.Fatalf("pods tracked after the pod left = %v, want 0", gauge())
	}
}

func TestStripManagedFieldsKeepsTheRest(t *testing.T) {
	crr := &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kruise-manager"}}},
		Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: "p"}}
	node := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"type": "virtual-kubelet"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}}
	for _, obj := range []metav1.Object{crr, node} {
		out, err := StripManagedFields(obj)
		if err != nil {
			t.Fatal(err)
		}
		m := out.(metav1.Object)
		if m.GetManagedFields() != nil || len(m.GetLabels()) != 1 || m.GetName() == "" {
			t.Errorf("%s: managed fields %v, labels %v", m.GetName(), m.GetManagedFields(), m.GetLabels())
		}
	}
	if crr.Spec.PodName != "p" {
		t.Errorf("spec lost: %+v", crr.Spec)
	}
}
