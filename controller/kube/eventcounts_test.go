package kube

import (
	"context"
	"testing"

	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// The informer event counts say what each event did: a pod added before it
// started (filtered), its readiness flip (filtered), its main's exit
// (queued), its deletion (queued).
func TestInformerEventsCountedByResult(t *testing.T) {
	pod := podtest.Pod("p").Namespace("default").UID("uid-p").Node("normal").
		Container("main").Container("log", podtest.Env(decision.EnvTerminate, "true")).Build()
	pod.Status.ContainerStatuses = nil // not started: the decision ignores it
	client := fake.NewClientset()
	scheme := runtime.NewScheme()
	metav1.AddMetaToScheme(scheme)
	caches, err := NewCaches(client, metadatafake.NewSimpleMetadataClient(scheme), kruisefake.NewSimpleClientset(), false)
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := NewController(caches, &recordingSyncer{synced: map[cache.ObjectName]int{}})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := ctrl.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	caches.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), caches.Synced()...)

	count := func(kind, event, result string) float64 {
		return testutil.ToFloat64(ctrl.events.vec.WithLabelValues(kind, event, result))
	}
	pods := client.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the add counted as filtered", func() bool { return count("pod", "add", "filtered") == 1 })

	running := podtest.Pod("p").Namespace("default").UID("uid-p").Node("normal").
		Container("main", podtest.Running()).Container("log", podtest.Env(decision.EnvTerminate, "true"), podtest.Running()).
		Condition(corev1.PodReady, corev1.ConditionTrue).Build()
	if _, err := pods.UpdateStatus(ctx, running, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the start counted as queued", func() bool { return count("pod", "update", "queued") == 1 })

	flipped := running.DeepCopy()
	flipped.Status.Conditions[0].Status = corev1.ConditionFalse
	if _, err := pods.UpdateStatus(ctx, flipped, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the readiness flip counted as filtered", func() bool { return count("pod", "update", "filtered") == 1 })

	exited := flipped.DeepCopy()
	exited.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
	if _, err := pods.UpdateStatus(ctx, exited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the exit counted as queued", func() bool { return count("pod", "update", "queued") == 2 })

	if err := pods.Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the delete counted as queued", func() bool { return count("pod", "delete", "queued") == 1 })
	if n := testutil.CollectAndCount(reg, "sidecar_terminator_informer_events_total"); n != 12 {
		t.Errorf("%d series registered, want 12 (2 kinds, 3 events, 2 results)", n)
	}
}
