package kube

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// discoveryStub answers the one discovery call the caches make, as the API
// server does: the group's resources, a 404 for a group not served, or an
// error.
type discoveryStub struct {
	discovery.DiscoveryInterface
	mu     sync.Mutex
	served bool
	err    error
	calls  int
}

func (d *discoveryStub) set(served bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.served, d.err = served, err
}

func (d *discoveryStub) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	switch {
	case d.err != nil:
		return nil, d.err
	case !d.served || gv != kruisev1alpha1.GroupVersion.String():
		return nil, apierrors.NewNotFound(kruisev1alpha1.Resource(""), gv)
	}
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "containerrecreaterequests", Namespaced: true}}}, nil
}

func TestCRRAPIServedReadsDiscovery(t *testing.T) {
	d := &discoveryStub{}
	if served, err := CRRAPIServed(d); served || err != nil {
		t.Errorf("group not served: CRRAPIServed = %v, %v; want false, nil", served, err)
	}
	d.set(true, nil)
	if served, err := CRRAPIServed(d); !served || err != nil {
		t.Errorf("served: CRRAPIServed = %v, %v; want true, nil", served, err)
	}
	d.set(true, errors.New("connection refused"))
	if _, err := CRRAPIServed(d); err == nil {
		t.Error("a discovery error was not returned")
	}
}

// OpenKruise installed while the controller runs: discovery (asked at once
// through RediscoverCRRAPI, as after a CRR create answered 404) starts the
// CRR informer, which lists our CRRs to the handlers added before it
// existed; the CRD removed turns CRRs off; a failed discovery keeps what
// was known.
func TestDiscoveryStartsAndStopsTheCRRInformer(t *testing.T) {
	scheme := runtime.NewScheme()
	metav1.AddMetaToScheme(scheme)
	ours := &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p-st1",
		Labels: map[string]string{reconciler.LabelManagedBy: reconciler.ManagedByValue, reconciler.LabelPodUID: "uid-1"}}}
	theirs := &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other"}}
	c, err := NewCaches(fake.NewClientset(), metadatafake.NewSimpleMetadataClient(scheme), kruisefake.NewSimpleClientset(ours, theirs), false)
	if err != nil {
		t.Fatal(err)
	}
	var added atomic.Int32
	if err := c.AddCRRHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) { added.Add(1) }}); err != nil {
		t.Fatal(err)
	}
	var logs logLines
	ctx, cancel := context.WithCancel(logs.context(context.Background()))
	defer cancel()
	c.Start(ctx.Done())
	if c.CRRAPIAvailable() || len(c.Synced()) != 2 {
		t.Fatalf("CRR API available before discovery found it (synced funcs %d)", len(c.Synced()))
	}
	d := &discoveryStub{served: true}
	done := make(chan struct{})
	go func() { defer close(done); c.DiscoverCRRAPI(ctx, d, time.Hour) }()

	c.RediscoverCRRAPI()
	eventually(t, "CRR API available", c.CRRAPIAvailable)
	eventually(t, "the handler saw our one CRR", func() bool { return added.Load() == 1 })
	eventually(t, "caches synced", c.HasSynced)
	// Each change is logged, as what it is.
	found, broken := "ContainerRecreateRequest API found", "its informer could not be set up"
	eventually(t, "the change logged", func() bool { return logs.count(found)+logs.count(broken) > 0 })
	if logs.count(found) != 1 || logs.count(broken) != 0 {
		t.Errorf("after the API was found, the log says:\n%s", logs.buf.String())
	}
	crrs, err := c.CRRs(podWithUID("default", "uid-1"))
	if err != nil || len(crrs) != 1 || crrs[0].Name != "p-st1" {
		t.Errorf("CRRs of the pod: %v, %v; want p-st1 only", crrs, err)
	}
	if crrs, _ := c.CRRs(podWithUID("elsewhere", "uid-1")); len(crrs) != 0 {
		t.Errorf("a CRR of another namespace was returned: %v", crrs)
	}

	calls := func() int { d.mu.Lock(); defer d.mu.Unlock(); return d.calls }
	d.set(true, errors.New("connection refused"))
	before := calls()
	c.RediscoverCRRAPI()
	eventually(t, "the failed discovery ran", func() bool { return calls() > before })
	eventually(t, "the failed discovery logged", func() bool {
		return logs.count("Discovery of the ContainerRecreateRequest API failed; keeping what was known", "connection refused") == 1
	})
	if !c.CRRAPIAvailable() {
		t.Error("a failed discovery turned CRRs off")
	}
	d.set(false, nil)
	c.RediscoverCRRAPI()
	eventually(t, "CRR API gone", func() bool { return !c.CRRAPIAvailable() })
	eventually(t, "the loss logged", func() bool { return logs.count("ContainerRecreateRequest API lost") == 1 })
	if crrs, _ := c.CRRs(podWithUID("default", "uid-1")); crrs != nil {
		t.Errorf("CRRs listed while the API is gone: %v", crrs)
	}
	cancel()
	<-done
}

func podWithUID(namespace string, uid types.UID) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "p", UID: uid}}
}

// The caches list only what they keep (pods of Job-type restart policies,
// this controller's CRRs) and index only what they read: a factory's
// namespace index is a set of keys per namespace over every cached object,
// which nothing here reads.
func TestTheCachesListOnlyWhatTheyKeepAndIndexOnlyWhatTheyRead(t *testing.T) {
	client, kruise := fake.NewClientset(), kruisefake.NewSimpleClientset()
	c := startedCaches(t, client, kruise, true)

	indexes := func(i cache.SharedIndexInformer) []string {
		var names []string
		for name := range i.GetIndexer().GetIndexers() {
			names = append(names, name)
		}
		return names
	}
	for name, got := range map[string][]string{"pod": indexes(c.PodInformer), "node": indexes(c.NodeInformer)} {
		if len(got) != 0 {
			t.Errorf("the %s informer keeps indexes %v; nothing reads them", name, got)
		}
	}
	if got := indexes(c.crrInformer()); len(got) != 1 || got[0] != crrByPodUID {
		t.Errorf("the CRR informer keeps indexes %v; want only %s", got, crrByPodUID)
	}

	restrictions := func(actions []k8stesting.Action, resource string) []k8stesting.ListRestrictions {
		var out []k8stesting.ListRestrictions
		for _, a := range actions {
			if l, ok := a.(k8stesting.ListAction); ok && a.GetResource().Resource == resource {
				out = append(out, l.GetListRestrictions())
			}
		}
		return out
	}
	pods := restrictions(client.Actions(), "pods")
	if len(pods) == 0 {
		t.Fatal("the pods were never listed")
	}
	for _, r := range pods {
		if r.Fields.String() != PodFieldSelector {
			t.Errorf("pods listed with field selector %q; want %q", r.Fields.String(), PodFieldSelector)
		}
	}
	crrs := restrictions(kruise.Actions(), "containerrecreaterequests")
	if len(crrs) == 0 {
		t.Fatal("the CRRs were never listed")
	}
	for _, r := range crrs {
		if want := reconciler.LabelManagedBy + "=" + reconciler.ManagedByValue; r.Labels.String() != want {
			t.Errorf("CRRs listed with label selector %q; want %q", r.Labels.String(), want)
		}
	}
}

// The pod cache tells whether the decision considers the pod it holds under
// a name without decoding it (reconciler.ConsideredReader), as
// decision.Considered answers on the pod itself; a name it does not hold is
// not held.
func TestThePodCacheTellsWhetherTheDecisionConsidersAPod(t *testing.T) {
	marked := jobPod("marked", podtest.Env(decision.EnvTerminate, "true")).Build()
	unmarked := jobPod("unmarked").Build()
	done := jobPod("done", podtest.Env(decision.EnvTerminate, "true")).Build()
	done.Status.Phase = corev1.PodSucceeded
	if !decision.Considered(marked) || decision.Considered(unmarked) || decision.Considered(done) {
		t.Fatal("the cases must be one considered pod and two not")
	}
	c := startedCaches(t, fake.NewClientset(marked, unmarked, done), kruisefake.NewSimpleClientset(), false)
	var reader reconciler.Reader = c
	cr, ok := reader.(reconciler.ConsideredReader)
	if !ok {
		t.Fatal("the caches are no reconciler.ConsideredReader: every wake is synced")
	}
	for _, p := range []*corev1.Pod{marked, unmarked, done} {
		considered, held := cr.PodConsidered(p.Namespace, p.Name)
		if !held || considered != decision.Considered(p) {
			t.Errorf("%s: considered %v held %v; want considered %v, held", p.Name, considered, held, decision.Considered(p))
		}
	}
	if considered, held := cr.PodConsidered("default", "gone"); held || considered {
		t.Errorf("a pod not held: considered %v held %v", considered, held)
	}
}

// startedCaches are the controller's caches on the fake clients, started
// and synced; they stop with the test.
func startedCaches(t *testing.T, client *fake.Clientset, kruise *kruisefake.Clientset, crrAPI bool) *Caches {
	t.Helper()
	scheme := runtime.NewScheme()
	metav1.AddMetaToScheme(scheme)
	c, err := NewCaches(client, metadatafake.NewSimpleMetadataClient(scheme), kruise, crrAPI)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c.Start(ctx.Done())
	eventually(t, "caches synced", c.HasSynced)
	return c
}
