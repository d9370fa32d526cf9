package app

import (
	"context"
	"strings"
	"testing"
	"time"

	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
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
	const image = "ghcr.io/sidecar-terminator/quick-exit:v1"
	pod := podtest.Pod("p").Namespace("default").UID("p-uid").Node("normal").OwnedByJob("j").
		Container("main", podtest.Exited(1, time.Now().Add(-time.Second))).
		Container("proxy", podtest.Env(decision.EnvTerminate, "true"), podtest.Env(decision.EnvTerminateWithImage, image), podtest.Running()).Build()
	var jobUID types.UID
	for _, o := range pod.OwnerReferences {
		jobUID = o.UID
	}
	notIn := batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{0, 1}}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "j", UID: jobUID},
		Spec: batchv1.JobSpec{PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
			{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &notIn}}}}}
	client := fake.NewClientset(pod.DeepCopy(), job)
	kruise := kruisefake.NewSimpleClientset()
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	caches, err := kube.NewCaches(client, metadatafake.NewSimpleMetadataClient(scheme), kruise, true)
	if err != nil {
		t.Fatal(err)
	}
	trimmed, _ := kube.TrimPod(pod.DeepCopy())
	if err := caches.PodInformer.GetIndexer().Add(trimmed); err != nil {
		t.Fatal(err)
	}
	if err := caches.NodeInformer.GetIndexer().Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "normal"}}); err != nil {
		t.Fatal(err)
	}
	cfg := reconciler.DefaultConfig()
	cfg.Policy.AllowedQuickExitImages = []string{image}
	rec, writer := newReconciler(cfg, caches, kube.Writer{Client: client, Kruise: kruise}, record.NewFakeRecorder(100), reconciler.NewMetrics(nil))
	client.ClearActions()

	if _, err := rec.Sync(context.Background(), cache.ObjectName{Namespace: "default", Name: "p"}); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	var calls []string
	for _, a := range client.Actions() {
		calls = append(calls, a.GetVerb()+" "+a.GetResource().Resource)
	}
	if got := strings.Join(calls, ","); got != "get jobs,patch pods" {
		t.Errorf("API calls %q, want the Job read live, then the swap", got)
	}
	if len(kruise.Actions()) != 0 {
		t.Errorf("CRR calls %v, want none: the rule reads a CRR's exit", kruise.Actions())
	}
	if n := writer.recent(); n != 1 {
		t.Errorf("%d writes counted for the events, want the swap", n)
	}
}
