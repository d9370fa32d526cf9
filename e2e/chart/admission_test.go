package chart

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/sidecar-terminator/sidecar-terminator/controller/deploy"
)

// A real kube-apiserver accepts every object the chart renders with strict
// field validation (a misspelt field is an error, not a silent drop), and
// admits the controller's pod in a namespace enforcing the restricted Pod
// Security level, while it rejects a privileged one there (so the check
// has teeth). No node is needed: the pod is created with dry-run.
func TestChartObjectsAdmittedUnderRestrictedPodSecurity(t *testing.T) {
	e, cp := newControlPlaneEnv(t)
	ctx := e.ctx
	objs, err := deploy.Template(ctx, e.helm, deploy.ChartDir(e.root), deploy.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cp.RestConfig)
	dyn := dynamic.NewForConfigOrDie(cp.RestConfig)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cp.RestConfig)))

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deploy.Namespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var dep *appsv1.Deployment
	for _, o := range objs {
		m, err := mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
		if err != nil {
			t.Fatalf("%s: %v", o.GetKind(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		if _, err := ri.Create(ctx, o, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			t.Errorf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if o.GetKind() == "Deployment" {
			dep = new(appsv1.Deployment)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, dep); err != nil {
				t.Fatal(err)
			}
		}
	}
	if dep == nil {
		t.Fatal("the chart renders no Deployment")
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "controller-", Namespace: deploy.Namespace, Labels: dep.Spec.Template.Labels},
		Spec: dep.Spec.Template.Spec}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	if _, err := cs.CoreV1().Pods(deploy.Namespace).Create(ctx, pod, dry); err != nil {
		t.Errorf("the chart's pod is not admitted under restricted Pod Security: %v", err)
	}
	// Restricted requires dropping ALL capabilities; the baseline does not.
	bad := pod.DeepCopy()
	bad.Spec.Containers[0].SecurityContext.Capabilities = nil
	_, err = cs.CoreV1().Pods(deploy.Namespace).Create(ctx, bad, dry)
	if err == nil || !strings.Contains(err.Error(), "PodSecurity") {
		t.Errorf("a pod keeping its capabilities was not rejected by Pod Security (err %v): the check above proves nothing", err)
	}
}
