package app

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/kube"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// A pod that finished after its sidecar was stopped by a CRR: kruise keeps
// that CRR Recreating until its deadline (under restartPolicy Never nothing
// is recreated). explain shows the phase as kruise wrote it, and says the
// kill is done rather than leaving "Recreating" to read as a kill under way.
func TestExplainShowsFinishedPodsCRRAsKruiseReportsIt(t *testing.T) {
	now := time.Now()
	pod := podtest.Pod("done").UID("u1").Node("n").Phase(corev1.PodSucceeded).
		Container("main", podtest.Exited(0, now.Add(-20*time.Second))).
		Container("proxy", podtest.Env(decision.EnvTerminate, "true"), podtest.Exited(137, now.Add(-15*time.Second))).Build()
	deadline := int64(60)
	crr := &kruisev1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "done-u1-st1", Namespace: "default", CreationTimestamp: metav1.NewTime(now.Add(-18 * time.Second)),
			Labels: map[string]string{reconciler.LabelManagedBy: reconciler.ManagedByValue, reconciler.LabelPodUID: "u1", reconciler.LabelAttempt: "1"}},
		Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: "done", ActiveDeadlineSeconds: &deadline,
			Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "proxy"}}},
		Status: kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestRecreating,
			ContainerRecreateStates: []kruisev1alpha1.ContainerRecreateRequestContainerRecreateState{
				{Name: "proxy", Phase: kruisev1alpha1.ContainerRecreateRequestRecreating, IsKilled: true}}},
	}
	client := fake.NewClientset(pod)
	cfg, err := DefaultOptions().ReconcilerConfig()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	read := kube.LiveReader{Client: client, Kruise: kruisefake.NewSimpleClientset(crr), CRRAPI: true}
	if err := explainPod(context.Background(), &out, client, read, cfg, "defaults", "default", "done"); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	row := regexp.MustCompile(`done-u1-st1\s+1\s+Recreating\s+proxy=Recreating\(killed\)\s+its containers have stopped, so the kill is done`)
	if !row.MatchString(got) {
		t.Errorf("explain does not show the CRR as kruise reports it, with its meaning:\n%s", got)
	}
	if !strings.Contains(got, "until its deadline at "+crr.CreationTimestamp.Add(time.Minute).UTC().Format(time.RFC3339)) {
		t.Errorf("explain does not say until when kruise keeps it Recreating:\n%s", got)
	}
}

// explain always looks for OpenKruise's own SidecarTerminator's CRR (a
// one-off read), and says when it acts on the pod too.
func TestExplainNamesASecondTerminator(t *testing.T) {
	now := time.Now()
	pod := podtest.Pod("job").UID("u2").Node("n").
		Container("main", podtest.Exited(0, now.Add(-2*time.Second))).
		Container("proxy", podtest.Env(decision.EnvTerminate, "true"), podtest.Running()).Build()
	kruiseCRR := &kruisev1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "sidecar-termination-u2", Namespace: "default", CreationTimestamp: metav1.NewTime(now.Add(-time.Second)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "job", UID: "u2"}}},
		Spec:   kruisev1alpha1.ContainerRecreateRequestSpec{PodName: "job", Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "proxy"}}},
		Status: kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestRecreating},
	}
	client := fake.NewClientset(pod, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	cfg, err := DefaultOptions().ReconcilerConfig()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	read := kube.LiveReader{Client: client, Kruise: kruisefake.NewSimpleClientset(kruiseCRR), CRRAPI: true}
	if err := explainPod(context.Background(), &out, client, read, cfg, "defaults", "default", "job"); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"Decision: InProgress",
		`"proxy" is being stopped by OpenKruise's SidecarTerminator (sidecar-termination-u2)`,
		"Warning:  SecondTerminator: OpenKruise's own SidecarTerminator also acts on this pod",
		"Second terminator: OpenKruise's own SidecarTerminator also acts on this pod: its ContainerRecreateRequest sidecar-termination-u2 (phase Recreating) names [proxy]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("explain lacks %q:\n%s", want, got)
		}
	}
}
