package chart

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/images"
)

// The kind suites run the mock node under the RBAC of kind/mock-node. Here
// the same chart is installed into a real apiserver and the mock node runs
// with its ServiceAccount's token: it must register its node and play a pod
// through an image swap without one forbidden call.
func TestMockNodeChartRBAC(t *testing.T) {
	e, cp := newControlPlaneEnv(t)
	ctx := e.ctx
	bin, err := cluster.BuildMockNode(ctx, e.root)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, e.helm, "install", "mock-node", filepath.Join(e.root, "kind", "mock-node"),
		"--kubeconfig", cp.Kubeconfig, "--namespace", "mock-node", "--create-namespace").CombinedOutput(); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	cs := kubernetes.NewForConfigOrDie(cp.RestConfig)
	tr, err := cs.CoreV1().ServiceAccounts("mock-node").CreateToken(ctx, "mock-node", &authv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cp.RestConfig.Host, CertificateAuthorityData: cp.RestConfig.CAData}
	kc.AuthInfos["mock-node"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "mock-node"}
	kc.CurrentContext = "c"
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "mock-node.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// The chart reads no Secret or ConfigMap outside its own namespace.
	for _, ns := range []string{"", "default", "kube-system"} {
		if allowed := canI(t, cs, "system:serviceaccount:mock-node:mock-node", "list", "secrets", ns); allowed {
			t.Errorf("the mock node's ServiceAccount may list secrets in namespace %q", ns)
		}
	}
	if !canI(t, cs, "system:serviceaccount:mock-node:mock-node", "watch", "secrets", "mock-node") {
		t.Errorf("the mock node's ServiceAccount may not watch secrets in its own namespace")
	}
	// As the chart's Deployment runs it (kind/mock-node/templates/deployment.yaml).
	mn := exec.Command(bin, "--kubeconfig", kubeconfig, "--nodes", "mock-virtual-node", "--secrets-namespace", "mock-node")
	mn.Stdout, mn.Stderr = logf, logf
	if err := mn.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mn.Process.Kill(); _ = mn.Wait(); logf.Close() })

	waitFor := func(what string, cond func(context.Context) (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, cond); err != nil {
			logs, _ := os.ReadFile(logPath)
			t.Fatalf("%s: %v\nmock-node log:\n%s", what, err, logs)
		}
	}
	waitFor("node Ready", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "mock-virtual-node", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "swap", Namespace: "default"}, Spec: corev1.PodSpec{
		NodeName: "mock-virtual-node", RestartPolicy: corev1.RestartPolicyNever,
		Tolerations: []corev1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: corev1.TolerationOpExists}},
		Containers: []corev1.Container{
			{Name: "main", Image: images.Workload.Ref, Args: []string{"main", "--seconds", "1", "--exit-code", "0"}},
			{Name: "proxy", Image: images.Workload.Ref, Args: []string{"sidecar", "--on-sigterm", "exit:0"}},
		}}}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("main terminated", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "swap", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "main" && s.State.Terminated != nil {
				return true, nil
			}
		}
		return false, nil
	})
	// What the controller does on a virtual node.
	patch := `[{"op":"replace","path":"/spec/containers/1/image","value":"` + images.QuickExit.Ref + `"}]`
	if _, err := cs.CoreV1().Pods("default").Patch(ctx, "swap", types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("pod Succeeded", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "swap", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodSucceeded, nil
	})
	logs, _ := os.ReadFile(logPath)
	if n := strings.Count(strings.ToLower(string(logs)), "forbidden"); n > 0 {
		t.Errorf("%d forbidden calls under the chart's RBAC:\n%s", n, logs)
	}
}

// canI asks the API server's authorizer whether user may verb resource in
// namespace ("" for every namespace).
func canI(t *testing.T, cs kubernetes.Interface, user, verb, resource, namespace string) bool {
	t.Helper()
	sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authzv1.SubjectAccessReview{
		Spec: authzv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:serviceaccounts", "system:authenticated"},
			ResourceAttributes: &authzv1.ResourceAttributes{Verb: verb, Resource: resource, Namespace: namespace}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}
