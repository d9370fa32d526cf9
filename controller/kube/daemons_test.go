package kube

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
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
		ni     *metav1.PartialObjectMetadata
		absent bool
		why    string
	}{
		"no NodeImage: not known, CRR":             {ni: nil, why: "no NodeImage"},
		"daemon wrote the status: served":          {ni: nodeImage("n", time.Hour, now, managerCreate, daemonStatusWrite), why: "kruise-daemon wrote"},
		"young NodeImage, no write yet: CRR":       {ni: nodeImage("n", time.Minute, now, managerCreate), why: "not written it yet"},
		"old NodeImage never written by a daemon":  {ni: nodeImage("n", time.Hour, now, managerCreate), absent: true, why: "never wrote"},
		"a spec write by kruise-daemon is not it":  {ni: nodeImage("n", time.Hour, now, metav1.ManagedFieldsEntry{Manager: "kruise-daemon"}), absent: true, why: "never wrote"},
		"a status write by someone else is not it": {ni: nodeImage("n", time.Hour, now, metav1.ManagedFieldsEntry{Manager: "kruise-manager", Subresource: "status"}), absent: true, why: "never wrote"},
	} {
		t.Run(name, func(t *testing.T) {
			var meta *metav1.ObjectMeta
			if tc.ni != nil {
				trimmed, _ := keepDaemonWrite(tc.ni)
				meta = &trimmed.(*metav1.PartialObjectMetadata).ObjectMeta
			}
			absent, why := KruiseDaemonFromNodeImage(meta, now)
			if absent != tc.absent || !strings.Contains(why, tc.why) {
				t.Errorf("absent %v (%s), want %v (%q)", absent, why, tc.absent, tc.why)
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
