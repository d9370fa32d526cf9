// Package nativesidecars runs the native-sidecar admission webhook on the
// local real cluster (e2e/cluster): the controller process serves it on
// 127.0.0.1 with the certificate it keeps itself, and the API server calls
// it through a MutatingWebhookConfiguration whose caBundle the controller
// wrote. Converted Jobs must finish with no write of the controller's; Jobs
// it cannot convert, or admitted while it is down, must finish through the
// kill path. Needs root, like e2e/realnode.
//
//	go test ./e2e/nativesidecars -count=1 -v
package nativesidecars

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/native"
	"github.com/sidecar-terminator/sidecar-terminator/controller/webhook"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
	"github.com/sidecar-terminator/sidecar-terminator/images"
	"github.com/sidecar-terminator/sidecar-terminator/images/workload/spec"
)

const (
	webhookConfig = "sidecar-terminator-native-e2e"
	optedIn       = "e2e-native"
	notOptedIn    = "e2e-native-off"
	virtualNode   = "mock-virtual-node"
)

func TestNativeSidecarsOnLocalCluster(t *testing.T) {
	if os.Geteuid() != 0 {
		msg := "the local cluster needs root (kubelet, containerd, cgroups, network namespaces)"
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and " + msg)
		}
		t.Skip("SKIPPED, NOT PASSED: " + msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute) // cold, the cluster's builds are most of it
	defer cancel()
	logf := func(f string, a ...any) { t.Logf("harness: "+f, a...) }
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	auditLog := filepath.Join(t.TempDir(), "audit.log")
	c, err := cluster.Up(ctx, cluster.UpOptions{AuditLogPath: auditLog, Logf: logf})
	if err != nil {
		t.Fatalf("bring the cluster up: %v", err)
	}
	t.Cleanup(func() {
		if dst := os.Getenv("E2E_LOGS_DIR"); dst != "" {
			if err := c.SaveLogs(filepath.Join(dst, "nativesidecars")); err != nil {
				t.Logf("save logs: %v", err)
			}
		}
		if err := c.Stop(); err != nil {
			t.Errorf("tear down (something may be left behind): %v", err)
		}
	})
	cs, err := kubernetes.NewForConfig(c.RestConfig)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RestConfig)
	if err != nil {
		t.Fatal(err)
	}
	cl := cases.Clients{Kube: cs, Dynamic: dyn}
	bin, err := cluster.BuildController(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	mockBin, err := cluster.BuildMockNode(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartVirtualNodes(ctx, mockBin, []string{virtualNode}); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyControllerRBAC(ctx, root); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	if err := installWebhook(ctx, cs, port); err != nil {
		t.Fatal(err)
	}
	webhookArgs := []string{
		"--native-sidecars-bind-address=127.0.0.1:" + strconv.Itoa(port),
		"--native-sidecars-webhook-config=" + webhookConfig,
		"--native-sidecars-cert-dns-names=localhost",
	}
	t0 := time.Now()
	if _, err := c.StartController(ctx, bin, webhookArgs...); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{optedIn, notOptedIn} {
		if err := cases.CreateNamespace(ctx, cs, ns); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().Namespaces().Patch(ctx, optedIn, "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"`+native.LabelOptIn+`":"`+native.LabelOptInValue+`"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitConverting(ctx, cs); err != nil {
		t.Fatalf("%v\ncontroller log:\n%s", err, c.Controller.LogTail(40))
	}
	logf("webhook serving, caBundle written and trusted by the API server: %s", time.Since(t0).Round(time.Millisecond))

	controllerWrites := func(t *testing.T, ns string) []string {
		t.Helper()
		time.Sleep(2 * time.Second) // the audit log's batch flushes every second
		w, err := cluster.MutatingRequestsIn(auditLog, cluster.ControllerServiceAccountUser, ns)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}

	t.Run("OpenKruise's env mark alone: stored as a native sidecar, completes with no write of ours", func(t *testing.T) {
		js := cases.JobSpec{Name: "kruise-env", Namespace: optedIn,
			Containers: []cases.Container{cases.Main("main", 2, 0), cases.Sidecar("sidecar", "exit:0", true)}}
		run := mustRun(t)(runJob(ctx, cl, js.Build(), 3*time.Minute))
		checkConverted(t, run.pod, []string{"sidecar"})
		if run.job != batchv1.JobComplete || run.pod.Status.Phase != corev1.PodSucceeded {
			t.Fatalf("job %s, pod %s; want Complete and Succeeded", run.job, run.pod.Status.Phase)
		}
		for _, w := range controllerWrites(t, optedIn) {
			if strings.Contains(w, "containerrecreaterequests") || strings.HasPrefix(w, "patch pods ") {
				t.Errorf("the controller wrote %q for a converted pod", w)
			}
		}
	})

	t.Run("shipper and proxy with stop-order: the shipper still delivers its last line", func(t *testing.T) {
		proxy := cases.Sidecar("proxy", "exit:0", true)
		proxy.ListenPort = 9000
		shipper := cases.Sidecar("shipper", "exit:0", true)
		shipper.DeliverPort = 9000
		js := cases.JobSpec{Name: "stop-order", Namespace: optedIn,
			Containers:  []cases.Container{cases.Main("main", 2, 0), proxy, shipper},
			Annotations: map[string]string{decision.AnnotationStopOrder: "shipper,proxy"}}
		run := mustRun(t)(runJob(ctx, cl, js.Build(), 3*time.Minute))
		// Reverse start order is the stop order: the proxy starts first.
		checkConverted(t, run.pod, []string{"proxy", "shipper"})
		if _, kept := run.pod.Annotations[decision.AnnotationStopOrder]; kept {
			t.Errorf("stop-order kept on the converted pod")
		}
		codes := initExitCodes(run.pod)
		if codes["shipper"] != 0 || codes["proxy"] != 0 {
			t.Errorf("exit codes %v; the shipper's %d means its last line was lost", codes, spec.ExitLost)
		}
		if run.job != batchv1.JobComplete {
			t.Errorf("job %s, want Complete", run.job)
		}
	})

	t.Run("a bad annotation: not converted, a Warning on the pod, finished through the kill path", func(t *testing.T) {
		js := cases.JobSpec{Name: "bad-annotation", Namespace: optedIn,
			Containers:  []cases.Container{cases.Main("main", 2, 0), cases.Sidecar("sidecar", "exit:0", true)},
			Annotations: map[string]string{decision.AnnotationSidecars: "not-a-container"}}
		run := mustRun(t)(runJob(ctx, cl, js.Build(), 3*time.Minute))
		if len(run.pod.Spec.InitContainers) != 0 {
			t.Fatalf("converted despite a bad annotation: %+v", run.pod.Spec.InitContainers)
		}
		if run.job != batchv1.JobComplete {
			t.Errorf("job %s, want Complete", run.job)
		}
		if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			evs, err := cases.PodEvents(ctx, cs, optedIn, run.pod.Name, decision.ReasonUnknownSidecarName)
			return err == nil && len(evs) > 0 && evs[0].Type == corev1.EventTypeWarning, nil
		}); err != nil {
			t.Errorf("no %s Warning on pod %s: %v", decision.ReasonUnknownSidecarName, run.pod.Name, err)
		}
	})

	t.Run("on the virtual node: not converted, completes through the swap", func(t *testing.T) {
		sidecar := cases.Sidecar(cases.VirtualSidecar, "exit:0", false).With(cases.EnvWhenJobExitWithImage, images.QuickExit.Ref)
		js := cases.VirtualJob("native-virtual", corev1.RestartPolicyNever, cases.Main(cases.VirtualMain, 2, 0), sidecar)
		js.Namespace = optedIn
		run := mustRun(t)(runJob(ctx, cl, cases.OnVirtualNode(js.Build()), 3*time.Minute))
		if len(run.pod.Spec.InitContainers) != 0 || run.pod.Annotations[native.AnnotationConverted] != "" {
			t.Fatalf("converted on a virtual node: %+v", run.pod.Spec.InitContainers)
		}
		if run.pod.Spec.NodeName != virtualNode || run.job != batchv1.JobComplete {
			t.Fatalf("node %s, job %s", run.pod.Spec.NodeName, run.job)
		}
		swapped := false
		for _, w := range controllerWrites(t, optedIn) {
			swapped = swapped || strings.HasPrefix(w, "patch pods "+run.pod.Name+" ")
		}
		if !swapped {
			t.Errorf("no image swap written for %s", run.pod.Name)
		}
	})

	t.Run("latency from main exit to pod Succeeded: converted against the CRR path", func(t *testing.T) {
		const n = 3
		var wg sync.WaitGroup
		runs := map[string][]*jobRun{}
		var mu sync.Mutex
		for i := 0; i < n; i++ {
			for _, ns := range []string{optedIn, notOptedIn} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					js := cases.JobSpec{Name: fmt.Sprintf("latency-%d", i), Namespace: ns,
						Containers: []cases.Container{cases.Main("main", 3, 0), cases.Sidecar("sidecar", "exit:0", true)}}
					r, err := runJob(ctx, cl, js.Build(), 3*time.Minute)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					runs[ns] = append(runs[ns], r)
					mu.Unlock()
				}()
			}
		}
		wg.Wait()
		for ns, label := range map[string]string{optedIn: "native sidecar (converted)", notOptedIn: "CRR path (not opted in)"} {
			var ds []time.Duration
			for _, r := range runs[ns] {
				if (ns == optedIn) != (len(r.pod.Spec.InitContainers) == 1) {
					t.Errorf("%s: pod %s converted=%v", label, r.pod.Name, len(r.pod.Spec.InitContainers) == 1)
				}
				if r.mainExitSeen.IsZero() || r.succeededSeen.IsZero() {
					t.Errorf("%s: pod %s: main exit or Succeeded not seen", label, r.pod.Name)
					continue
				}
				ds = append(ds, r.succeededSeen.Sub(r.mainExitSeen))
			}
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
			t.Logf("MEASURED %s: main exit seen -> pod Succeeded seen, %d pods: %v", label, len(ds), ds)
		}
		crrs := 0
		for _, w := range controllerWrites(t, notOptedIn) {
			if strings.HasPrefix(w, "create containerrecreaterequests ") {
				crrs++
			}
		}
		if crrs < n {
			t.Errorf("%d CRRs created for the %d unconverted pods", crrs, n)
		}
	})

	t.Run("webhook stopped mid-run: pods admitted unchanged finish through the kill path", func(t *testing.T) {
		// A converted Job is running when the controller (and its webhook) stops.
		running := cases.JobSpec{Name: "before-stop", Namespace: optedIn,
			Containers: []cases.Container{cases.Main("main", 8, 0), cases.Sidecar("sidecar", "exit:0", true)}}
		if _, err := cs.BatchV1().Jobs(optedIn).Create(ctx, running.Build(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := waitPodOf(ctx, cs, optedIn, "before-stop"); err != nil {
			t.Fatal(err)
		}
		if err := c.Controller.Stop(); err != nil {
			t.Fatal(err)
		}
		// Admitted while nothing answers the webhook: unchanged, at once.
		t1 := time.Now()
		down := cases.JobSpec{Name: "while-down", Namespace: optedIn,
			Containers: []cases.Container{cases.Main("main", 2, 0), cases.Sidecar("sidecar", "exit:0", true)}}
		var downRun *jobRun
		var downErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			downRun, downErr = runJob(ctx, cl, down.Build(), 3*time.Minute)
		}()
		if err := waitPodOf(ctx, cs, optedIn, "while-down"); err != nil {
			t.Fatal(err)
		}
		logf("pod admitted with the webhook down: %s after the Job's creation", time.Since(t1).Round(time.Millisecond))
		// The controller comes back without the webhook: the kill path.
		if _, err := c.StartController(ctx, bin); err != nil {
			t.Fatal(err)
		}
		<-done
		if downErr != nil {
			t.Fatal(downErr)
		}
		if len(downRun.pod.Spec.InitContainers) != 0 || downRun.pod.Annotations[native.AnnotationConverted] != "" {
			t.Fatalf("admitted while the webhook was down, yet converted: %+v", downRun.pod.Spec.InitContainers)
		}
		if downRun.job != batchv1.JobComplete {
			t.Errorf("job while-down %s, want Complete", downRun.job)
		}
		crr := false
		for _, w := range controllerWrites(t, optedIn) {
			crr = crr || strings.HasPrefix(w, "create containerrecreaterequests "+downRun.pod.Name)
		}
		if !crr {
			t.Errorf("no CRR for %s: not finished through the kill path", downRun.pod.Name)
		}
		if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			j, err := cs.BatchV1().Jobs(optedIn).Get(ctx, "before-stop", metav1.GetOptions{})
			return err == nil && cases.JobFinished(j) == batchv1.JobComplete, nil
		}); err != nil {
			t.Errorf("the converted Job running while the webhook stopped did not complete: %v", err)
		}
	})
}

// mustRun fails the test on a run's error, from the test's goroutine.
func mustRun(t *testing.T) func(*jobRun, error) *jobRun {
	return func(r *jobRun, err error) *jobRun {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// installWebhook grants the controller's ServiceAccount what the webhook
// calls (webhook.Permissions, as the chart does) and registers the webhook
// as the chart does, at the controller process's address: no caBundle yet,
// the controller writes it.
func installWebhook(ctx context.Context, cs kubernetes.Interface, port int) error {
	sa := []rbacv1.Subject{{Kind: "ServiceAccount", Name: cluster.ControllerName, Namespace: cluster.ControllerNamespace}}
	var cluserRules, nsRules []rbacv1.PolicyRule
	for _, p := range webhook.Permissions {
		r := rbacv1.PolicyRule{APIGroups: []string{p.Group}, Resources: []string{p.Resource}, Verbs: p.Verbs}
		if p.Named && p.Namespaced {
			r.ResourceNames = []string{"sidecar-terminator-webhook-tls"}
		} else if p.Named {
			r.ResourceNames = []string{webhookConfig}
		}
		if p.Namespaced {
			nsRules = append(nsRules, r)
		} else {
			cluserRules = append(cluserRules, r)
		}
	}
	name := "sidecar-terminator-webhook"
	ref := func(kind string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: kind, Name: name}
	}
	rb := cs.RbacV1()
	for _, err := range []error{
		ignoreExists(rb.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: cluserRules}, metav1.CreateOptions{})),
		ignoreExists(rb.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref("ClusterRole"), Subjects: sa}, metav1.CreateOptions{})),
		ignoreExists(rb.Roles(cluster.ControllerNamespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: nsRules}, metav1.CreateOptions{})),
		ignoreExists(rb.RoleBindings(cluster.ControllerNamespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref("Role"), Subjects: sa}, metav1.CreateOptions{})),
	} {
		if err != nil {
			return err
		}
	}
	ignore, ifNeeded, none := admissionregistrationv1.Ignore, admissionregistrationv1.IfNeededReinvocationPolicy, admissionregistrationv1.SideEffectClassNone
	timeout := int32(5)
	url := fmt.Sprintf("https://localhost:%d%s", port, webhook.Path)
	_, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: webhookConfig},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "namespaces.native-sidecars.sidecar-terminator.io", AdmissionReviewVersions: []string{"v1"},
			FailurePolicy: &ignore, ReinvocationPolicy: &ifNeeded, SideEffects: &none, TimeoutSeconds: &timeout,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{native.LabelOptIn: native.LabelOptInValue}},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
		}},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// ignoreExists: the objects may remain from an earlier start in this run.
func ignoreExists[T any](_ T, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// waitConverting waits until the API server sends pods to the webhook and
// trusts it: a dry-run pod (webhooks with no side effects see dry runs)
// comes back converted.
func waitConverting(ctx context.Context, cs kubernetes.Interface) error {
	js := cases.JobSpec{Name: "probe", Containers: []cases.Container{cases.Main("main", 1, 0), cases.Sidecar("sidecar", "exit:0", true)}}
	tmpl := js.Build().Spec.Template
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: optedIn}, Spec: tmpl.Spec}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Pods(optedIn).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("%d init containers", len(got.Spec.InitContainers))
		return len(got.Spec.InitContainers) == 1, nil
	})
	if err != nil {
		return fmt.Errorf("the webhook never converted a dry-run pod (last: %s): %w", last, err)
	}
	return nil
}

func waitPodOf(ctx context.Context, cs kubernetes.Interface, ns, job string) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cases.JobPods(ctx, cs, ns, job)
		return err == nil && len(pods) > 0, nil
	})
}

// jobRun is one Job run to its end, its pod's last version, and when this
// test saw the main container's exit and the pod's Succeeded phase (the
// same watch, so both carry the same delay).
type jobRun struct {
	job                         batchv1.JobConditionType
	pod                         *corev1.Pod
	mainExitSeen, succeededSeen time.Time
}

func runJob(ctx context.Context, cl cases.Clients, job *batchv1.Job, timeout time.Duration) (*jobRun, error) {
	ns := job.Namespace
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := cl.Kube.CoreV1().Pods(ns).Watch(wctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
	if err != nil {
		return nil, err
	}
	run := &jobRun{}
	var mu sync.Mutex
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			now := time.Now()
			mu.Lock()
			if s, ok := cases.ContainerState(p, "main"); ok && s.State.Terminated != nil && run.mainExitSeen.IsZero() {
				run.mainExitSeen = now
			}
			if p.Status.Phase == corev1.PodSucceeded && run.succeededSeen.IsZero() {
				run.succeededSeen = now
			}
			mu.Unlock()
		}
	}()
	if _, err := cl.Kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create job %s/%s: %w", ns, job.Name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		j, err := cl.Kube.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		run.job = cases.JobFinished(j)
		return run.job != "", nil
	})
	pods, perr := cases.JobPods(ctx, cl.Kube, ns, job.Name)
	if perr != nil || len(pods) == 0 {
		return nil, fmt.Errorf("pods of job %s/%s: %v (%d)", ns, job.Name, perr, len(pods))
	}
	if err != nil {
		return nil, fmt.Errorf("job %s/%s did not finish: %w; pod %+v", ns, job.Name, err, pods[0].Status)
	}
	// The pod's phase may follow the Job's condition by a moment.
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return !run.succeededSeen.IsZero(), nil
	})
	mu.Lock()
	defer mu.Unlock()
	run.pod = &pods[0]
	return run, nil
}

// checkConverted: the named sidecars are init containers with
// restartPolicy Always in that order, after the pod's own, and no longer
// regular containers; main stays.
func checkConverted(t *testing.T, pod *corev1.Pod, sidecars []string) {
	t.Helper()
	var native []string
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			native = append(native, c.Name)
		}
	}
	if !slices.Equal(native, sidecars) {
		t.Errorf("native sidecars %v, want %v", native, sidecars)
	}
	var regular []string
	for _, c := range pod.Spec.Containers {
		regular = append(regular, c.Name)
	}
	if !slices.Equal(regular, []string{"main"}) {
		t.Errorf("regular containers %v, want [main]", regular)
	}
	if !strings.HasPrefix(pod.Annotations["sidecar-terminator.io/converted"], "moved ") {
		t.Errorf("no conversion annotation: %v", pod.Annotations)
	}
}

func initExitCodes(pod *corev1.Pod) map[string]int32 {
	out := map[string]int32{}
	for _, s := range pod.Status.InitContainerStatuses {
		if s.State.Terminated != nil {
			out[s.Name] = s.State.Terminated.ExitCode
		} else {
			out[s.Name] = -1
		}
	}
	return out
}
