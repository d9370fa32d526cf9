package apiserver

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/deploy"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/hack/toolbin"
)

// installChartPolicy renders the chart's ValidatingAdmissionPolicy and its
// binding with the pinned helm, as `helm install` would on a 1.30+ cluster,
// and creates them.
func installChartPolicy(t *testing.T, ctx context.Context, e *env, extra ...string) {
	t.Helper()
	helm, err := toolbin.Path(ctx, "helm")
	if err != nil {
		t.Fatalf("helm: %v", err)
	}
	root, _ := filepath.Abs("../..")
	args := append([]string{"--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
		"--show-only", "templates/admissionpolicy.yaml"}, extra...)
	objs, err := deploy.Template(ctx, helm, deploy.ChartDir(root), cluster.ControllerNamespace, args...)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 {
		t.Fatalf("the chart rendered %d policy objects, want a policy and its binding", len(objs))
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ValidatingAdmissionPolicy":
			var p admissionv1.ValidatingAdmissionPolicy
			mustConvert(t, o.Object, &p)
			if _, err := e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		case "ValidatingAdmissionPolicyBinding":
			var b admissionv1.ValidatingAdmissionPolicyBinding
			mustConvert(t, o.Object, &b)
			if _, err := e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &b, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("unexpected %s", o.GetKind())
		}
	}
}

func mustConvert(t *testing.T, in map[string]any, out any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(in, out); err != nil {
		t.Fatal(err)
	}
}

// asController is a client that impersonates the controller's ServiceAccount.
func asController(t *testing.T, e *env) (kubernetes.Interface, kruiseclient.Interface) {
	cfg := rest.CopyConfig(e.cp.RestConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: cluster.ControllerServiceAccountUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + cluster.ControllerNamespace, "system:authenticated"}}
	return kubernetes.NewForConfigOrDie(cfg), kruiseclient.NewForConfigOrDie(cfg)
}

// TestServiceAccountHeldToWhatTheControllerDoes installs the chart's policy
// and, impersonating the controller's ServiceAccount, shows every write RBAC
// allows it but the controller never makes refused by the policy, and every
// write the controller makes admitted; the real controller then stops two
// sidecars through the policy (a swap and a CRR).
func TestServiceAccountHeldToWhatTheControllerDoes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, true)
	installChartPolicy(t, ctx, e)
	kube, kruise := asController(t, e)
	e.createNode(t, ctx, "normal-1", nil)
	e.createNode(t, ctx, "virtual-1", map[string]string{"type": "virtual-kubelet"})

	probe := e.createPod(t, ctx, jobPod("probe", "normal-1", false))
	patch := func(pod *corev1.Pod, sub string, pt types.PatchType, body string) error {
		var subs []string
		if sub != "" {
			subs = []string{sub}
		}
		_, err := kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, pt, []byte(body), metav1.PatchOptions{}, subs...)
		return err
	}
	// Policies are loaded asynchronously: wait until one is in force (a new
	// image each try: a patch that changes nothing is admitted).
	try := 0
	waitUntil(t, ctx, "the policy in force", func(ctx context.Context) (bool, error) {
		try++
		err := patch(probe, "", types.JSONPatchType, fmt.Sprintf(`[{"op":"replace","path":"/spec/containers/1/image","value":"%s-%d"}]`, attackerImage, try))
		return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy"), nil
	})

	always := jobPod("always", "normal-1", false)
	always.Spec.RestartPolicy = corev1.RestartPolicyAlways
	alwaysPod := e.createPod(t, ctx, always)
	withInit := jobPod("with-init", "normal-1", false)
	withInit.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "example.com/init:1"}}
	withInitPod := e.createPod(t, ctx, withInit)
	if err := e.cp.EnsureNamespace(ctx, "kube-system"); err != nil {
		t.Fatal(err)
	}
	system := jobPod("system", "normal-1", false)
	system.Namespace = "kube-system"
	systemPod := e.createPod(t, ctx, system)
	job := e.createPod(t, ctx, jobPod("job", "normal-1", false))
	swap := func(image string) string {
		return `[{"op":"replace","path":"/spec/containers/1/image","value":"` + image + `"}]`
	}
	terminal := func(cond string) string {
		return fmt.Sprintf(`{"status":{"phase":"Succeeded","conditions":[{"type":%q,"status":"True"}]}}`, cond)
	}
	crr := func(name string, labels map[string]string, owner *corev1.Pod) error {
		c := &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
			Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: job.Name,
				Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "sidecar"}}}}
		if owner != nil {
			c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner.Name, UID: owner.UID}}
		}
		_, err := kruise.AppsV1alpha1().ContainerRecreateRequests("default").Create(ctx, c, metav1.CreateOptions{})
		return err
	}
	ours := map[string]string{reconciler.LabelManagedBy: reconciler.ManagedByValue, reconciler.LabelPodUID: string(job.UID)}

	forbidden := map[string]func() error{
		"image not in the allowlist": func() error { return patch(job, "", types.JSONPatchType, swap(attackerImage)) },
		"pod with restartPolicy Always": func() error {
			return patch(alwaysPod, "", types.JSONPatchType, swap(quickExit))
		},
		"init container's image": func() error {
			return patch(withInitPod, "", types.JSONPatchType, `[{"op":"replace","path":"/spec/initContainers/0/image","value":"`+quickExit+`"}]`)
		},
		"pod in kube-system": func() error { return patch(systemPod, "", types.JSONPatchType, swap(quickExit)) },
		"a label":            func() error { return patch(job, "", types.MergePatchType, `{"metadata":{"labels":{"x":"y"}}}`) },
		"a foreign annotation": func() error {
			return patch(job, "", types.MergePatchType, `{"metadata":{"annotations":{"x":"y"}}}`)
		},
		"terminal phase without our condition": func() error {
			return patch(job, "status", types.MergePatchType, `{"status":{"phase":"Failed"}}`)
		},
		"phase Running with our condition": func() error {
			return patch(job, "status", types.MergePatchType, `{"status":{"phase":"Running","conditions":[{"type":"SidecarTerminated","status":"True"}]}}`)
		},
		"CRR without our labels": func() error { return crr("no-labels", nil, job) },
		"CRR owned by no pod":    func() error { return crr("no-owner", ours, nil) },
		"CRR owned by another pod": func() error {
			return crr("other-owner", ours, alwaysPod)
		},
		"delete of a CRR not ours": func() error {
			if _, err := e.kruise.AppsV1alpha1().ContainerRecreateRequests("default").Create(ctx, &kruisev1alpha1.ContainerRecreateRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"},
				Spec:       kruisev1alpha1.ContainerRecreateRequestSpec{PodName: job.Name, Containers: []kruisev1alpha1.ContainerRecreateRequestContainer{{Name: "proxy"}}}}, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("set-up (as admin): %w", err)
			}
			return kruise.AppsV1alpha1().ContainerRecreateRequests("default").Delete(ctx, "someone-elses", metav1.DeleteOptions{})
		},
	}
	for name, write := range forbidden {
		err := write()
		switch {
		case err == nil:
			t.Errorf("%s: admitted, want refused", name)
		case !strings.Contains(err.Error(), "ValidatingAdmissionPolicy"):
			t.Errorf("%s: refused, but not by the policy: %v", name, err)
		case strings.Contains(err.Error(), "resulted in error"):
			t.Errorf("%s: refused by an error in the policy, not by its rule: %v", name, err)
		default:
			msg := err.Error()
			t.Logf("refused: %-38s %s", name, msg[strings.LastIndex(msg, ":")+1:])
		}
	}
	admitted := []struct {
		name  string
		write func() error
	}{
		{"image swap to the allowlisted image", func() error { return patch(job, "", types.JSONPatchType, swap(quickExit)) }},
		{"our annotation", func() error {
			return patch(job, "", types.MergePatchType, `{"metadata":{"annotations":{"`+decision.AnnotationCRRAttempts+`":"2"}}}`)
		}},
		{"the stop order's stage mark", func() error {
			return patch(job, "", types.MergePatchType, `{"metadata":{"annotations":{"`+decision.AnnotationStopStage+`":"1 2026-11-23T07:00:00Z"}}}`)
		}},
		{"CRR with our labels, owned by its pod", func() error { return crr("ours", ours, job) }},
		{"delete of our CRR (a stop order's earlier stage)", func() error {
			return kruise.AppsV1alpha1().ContainerRecreateRequests("default").Delete(ctx, "ours", metav1.DeleteOptions{})
		}},
		{"terminal phase with our condition", func() error { return patch(job, "status", types.MergePatchType, terminal("SidecarTerminated")) }},
	}
	for _, a := range admitted {
		if err := a.write(); err != nil {
			t.Errorf("%s: refused: %v", a.name, err)
		} else {
			t.Logf("admitted: %s", a.name)
		}
	}

	// The controller itself, under the policy: a swap and a CRR.
	swapPod := e.createPod(t, ctx, jobPod("swap-pod", "virtual-1", true, envImage))
	crrPod := e.createPod(t, ctx, jobPod("crr-pod", "normal-1", true, envCRR))
	e.waitForEvent(t, ctx, swapPod, "Normal "+reconciler.ReasonTerminated)
	e.waitForEvent(t, ctx, crrPod, "Normal "+reconciler.ReasonTerminated)
	if _, err := e.kruise.AppsV1alpha1().ContainerRecreateRequests("default").Get(ctx, decision.CRRName(crrPod, 1), metav1.GetOptions{}); err != nil {
		t.Errorf("the controller's CRR: %v", err)
	}
}

// TestPermanentRefusalIsAWarningNotARetryStorm is the third finding of the
// security review: an admission policy (not ours) refuses every image change
// with 422. The controller's swap is refused once, the pod gets a Warning,
// the refusal counts as an error, and the controller does not retry it in a
// loop.
func TestPermanentRefusalIsAWarningNotARetryStorm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, true)
	deny := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "no-image-changes"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}},
			Validations: []admissionv1.Validation{{Expression: "object.spec.containers.map(c, c.image) == oldObject.spec.containers.map(c, c.image)",
				Message: "images are immutable here", Reason: ptr(metav1.StatusReasonInvalid)}},
		}}
	if _, err := e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "no-image-changes"},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "no-image-changes",
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}
	if _, err := e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.createNode(t, ctx, "virtual-1", map[string]string{"type": "virtual-kubelet"})
	probe := e.createPod(t, ctx, jobPod("probe", "virtual-1", false))
	// A new image each try: a patch that changes nothing passes the policy.
	try := 0
	waitUntil(t, ctx, "the policy in force", func(ctx context.Context) (bool, error) {
		try++
		_, err := e.kube.CoreV1().Pods("default").Patch(ctx, probe.Name, types.JSONPatchType,
			[]byte(fmt.Sprintf(`[{"op":"replace","path":"/spec/containers/1/image","value":"x.example/y:%d"}]`, try)), metav1.PatchOptions{})
		return apierrors.IsInvalid(err), nil
	})

	pod := e.createPod(t, ctx, jobPod("refused", "virtual-1", true, envImage))
	e.waitForEvent(t, ctx, pod, "Warning "+decision.ReasonSidecarKillFailed)
	first := time.Now()
	// Watch for a while: a storm would be a patch every few hundred
	// milliseconds (15 in 90 s before); a permanent refusal waits minutes.
	time.Sleep(30 * time.Second)
	var patches int
	for _, w := range e.controllerWrites(t) {
		if strings.HasPrefix(w, "patch pods refused ") {
			patches++
		}
	}
	t.Logf("patches of the refused pod in the %s after its Warning (and before): %d", time.Since(first).Round(time.Second), patches)
	if patches > 2 {
		t.Errorf("%d patches of a permanently refused pod; want at most 2", patches)
	}
	if n, err := e.metric(ctx, `sidecar_terminator_actions_total{method="ImageSwap",result="error"}`); err != nil || n < 1 {
		t.Errorf("image swap errors counted: %v (%v), want at least 1", n, err)
	}
	if n, err := e.metric(ctx, `sidecar_terminator_refused_writes_total{class="permanent",method="ImageSwap"}`); err != nil || n < 1 {
		t.Errorf("permanent refusals counted: %v (%v), want at least 1", n, err)
	}
}

func ptr[T any](v T) *T { return &v }
