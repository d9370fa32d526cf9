package kube

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

func nodeImage(name string, age time.Duration, now time.Time, managers ...metav1.ManagedFieldsEntry) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name,
		CreationTimestamp: metav1.NewTime(now.Add(-age)), ManagedFields: managers}}
}

var (
	daemonStatusWrite = metav1.ManagedFieldsEntry{Manager: "kruise-daemon", Operation: metav1.ManagedFieldsOperationUpdate,
		Subresource: "status", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:desired":{}}}`)}}
	managerCreate = metav1.ManagedFieldsEntry{Manager: "kruise-manager", Operation: metav1.ManagedFieldsOperationUpdate}
)

// The rule read from kruise v1.9.1 (daemons.go): only a NodeImage older
// than the grace with no status write by kruise-daemon says "no daemon".
func TestKruiseDaemonFromNodeImage(t *testing.T) {
	now := podtest.Epoch
	for name, tc := range map[string]struct {
		ni    *metav1.PartialObjectMetadata
		grace time.Duration // 0: the default
		state decision.DaemonState
		why   string
	}{
		"no NodeImage: not known, CRR":             {ni: nil, why: "no NodeImage"},
		"daemon wrote the status: served":          {ni: nodeImage("n", time.Hour, now, managerCreate, daemonStatusWrite), state: decision.DaemonServes, why: "kruise-daemon wrote"},
		"young NodeImage, no write yet: CRR":       {ni: nodeImage("n", time.Minute, now, managerCreate), why: "not written it yet"},
		"old NodeImage never written by a daemon":  {ni: nodeImage("n", time.Hour, now, managerCreate), state: decision.DaemonAbsent, why: "never wrote"},
		"a spec write by kruise-daemon is not it":  {ni: nodeImage("n", time.Hour, now, metav1.ManagedFieldsEntry{Manager: "kruise-daemon"}), state: decision.DaemonAbsent, why: "never wrote"},
		"a status write by someone else is not it": {ni: nodeImage("n", time.Hour, now, metav1.ManagedFieldsEntry{Manager: "kruise-manager", Subresource: "status"}), state: decision.DaemonAbsent, why: "never wrote"},
		// --kruise-daemon-grace moves the line both ways.
		"a shorter grace: absent sooner":       {ni: nodeImage("n", 30*time.Second, now, managerCreate), grace: 20 * time.Second, state: decision.DaemonAbsent, why: "created 30s ago (more than 20s)"},
		"a shorter grace, not yet passed":      {ni: nodeImage("n", 10*time.Second, now, managerCreate), grace: 20 * time.Second, why: "10s old"},
		"a longer grace: still waiting at 1 h": {ni: nodeImage("n", time.Hour, now, managerCreate), grace: 2 * time.Hour, why: "not written it yet (it has 2h0m0s)"},
	} {
		t.Run(name, func(t *testing.T) {
			var meta *metav1.ObjectMeta
			if tc.ni != nil {
				trimmed, _ := keepDaemonWrite(tc.ni)
				meta = &trimmed.(*metav1.PartialObjectMetadata).ObjectMeta
			}
			grace := tc.grace
			if grace == 0 {
				grace = reconciler.DefaultKruiseDaemonGrace
			}
			state, why := KruiseDaemonFromNodeImage(meta, now, grace)
			if state != tc.state || !strings.Contains(why, tc.why) {
				t.Errorf("state %v (%s), want %v (%q)", state, why, tc.state, tc.why)
			}
		})
	}
}

// A node whose NodeImage kruise-daemon never wrote gets no CRR: the image
// swap where an image is known, else an immediate NoTerminationPath.
func TestSyncOnANodeWithoutDaemon(t *testing.T) {
	for name, tc := range map[string]struct {
		sidecar []podtest.Option
		writes  string
		warning string
	}{
		"image known: swapped":  {sidecar: []podtest.Option{podtest.Env(decision.EnvTerminate, "true"), podtest.Env(decision.EnvTerminateWithImage, quickExit)}, writes: "patch pods"},
		"no image: Warning now": {sidecar: []podtest.Option{podtest.Env(decision.EnvTerminate, "true")}, warning: decision.ReasonNoTerminationPath},
	} {
		t.Run(name, func(t *testing.T) {
			pod := jobPod("job-n", tc.sidecar...).Namespace("default").Node("node-1").Build()
			f := newFixture(t, []*corev1.Pod{pod}, normalNode)
			if err := f.caches.WatchNodeImages(); err != nil {
				t.Fatal(err)
			}
			ni, _ := keepDaemonWrite(nodeImage("node-1", time.Hour, f.clock.Now(), managerCreate))
			if err := f.caches.NodeImageInformer.GetIndexer().Add(ni); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range f.sync("job-n") {
				got = append(got, w.GetVerb()+" "+w.GetResource().Resource)
			}
			if strings.Join(got, ",") != tc.writes {
				t.Fatalf("writes %v, want %q (never a CRR)", got, tc.writes)
			}
			events := strings.Join(f.drainEvents(), "\n")
			if tc.warning != "" && (!strings.Contains(events, tc.warning) || !strings.Contains(events, "no kruise-daemon")) {
				t.Fatalf("events %s, want a %s naming the missing daemon", events, tc.warning)
			}
		})
	}
}

// The controller's grace (--kruise-daemon-grace, through reconciler.Config)
// is the one the rule applies: a NodeImage 30 s old without a daemon's write
// still gets a CRR under the default, the image swap under a 20 s grace.
func TestSyncAppliesTheConfiguredDaemonGrace(t *testing.T) {
	for name, tc := range map[string]struct {
		grace  time.Duration
		writes string
	}{
		"default grace: too early to tell, CRR": {grace: reconciler.DefaultKruiseDaemonGrace, writes: "create containerrecreaterequests"},
		"20 s grace: no daemon, swapped":        {grace: 20 * time.Second, writes: "patch pods"},
	} {
		t.Run(name, func(t *testing.T) {
			pod := jobPod("job-g", podtest.Env(decision.EnvTerminate, "true"), podtest.Env(decision.EnvTerminateWithImage, quickExit)).
				Namespace("default").Node("node-1").Build()
			f := newFixture(t, []*corev1.Pod{pod}, normalNode)
			if err := f.caches.WatchNodeImages(); err != nil {
				t.Fatal(err)
			}
			ni, _ := keepDaemonWrite(nodeImage("node-1", 30*time.Second, f.clock.Now(), managerCreate))
			if err := f.caches.NodeImageInformer.GetIndexer().Add(ni); err != nil {
				t.Fatal(err)
			}
			cfg := reconciler.DefaultConfig()
			cfg.KruiseDaemonGrace = tc.grace
			f.rec = reconciler.New(cfg, f.caches, Writer{Client: f.client, Kruise: f.kruise}, Writer{Client: f.client, Kruise: f.kruise}, f.events, f.metrics, f.clock)
			var got []string
			for _, w := range f.sync("job-g") {
				got = append(got, w.GetVerb()+" "+w.GetResource().Resource)
			}
			if strings.Join(got, ",") != tc.writes {
				t.Fatalf("writes %v, want %q", got, tc.writes)
			}
		})
	}
}

// The grace is inclusive: a NodeImage exactly as old as the grace, never
// written by kruise-daemon, says the node has no daemon.
func TestKruiseDaemonAbsentAtExactlyTheGrace(t *testing.T) {
	now := podtest.Epoch
	grace := 20 * time.Second
	for _, tc := range []struct {
		age   time.Duration
		state decision.DaemonState
	}{{grace - time.Second, decision.DaemonUnknown}, {grace, decision.DaemonAbsent}} {
		ni := nodeImage("n", tc.age, now, managerCreate)
		if state, why := KruiseDaemonFromNodeImage(&ni.ObjectMeta, now, grace); state != tc.state {
			t.Errorf("NodeImage %s old, grace %s: state %v (%s), want %v", tc.age, grace, state, why, tc.state)
		}
	}
}

// NodeImages are watched only where apps.kruise.io/v1beta1 serves them:
// the group version missing or serving other resources is "no", and a
// discovery that fails is an error, not a "no".
func TestNodeImagesAreWatchedOnlyWhereServed(t *testing.T) {
	gv := nodeImagesResource.GroupVersion().String()
	for _, tc := range []struct {
		name      string
		resources []*metav1.APIResourceList
		fail      bool
		served    bool
	}{
		{"served", []*metav1.APIResourceList{{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "imagepulljobs"}, {Name: "nodeimages"}}}}, false, true},
		{"other resources only", []*metav1.APIResourceList{{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "imagepulljobs"}}}}, false, false},
		{"group version not served", nil, false, false},
		{"discovery fails", nil, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := fake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
			d.Resources = tc.resources
			if tc.fail {
				d.PrependReactor("get", "resource", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewServiceUnavailable("aggregator down")
				})
			}
			served, err := NodeImagesServed(d)
			if served != tc.served || (err != nil) != tc.fail {
				t.Errorf("NodeImagesServed = %v, %v; want %v, error %v", served, err, tc.served, tc.fail)
			}
		})
	}
}
