package app

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/kube"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

const twoContexts = `apiVersion: v1
kind: Config
current-context: a
clusters:
- {name: a, cluster: {server: "https://127.0.0.1:1001"}}
- {name: b, cluster: {server: "https://127.0.0.1:1002"}}
users:
- {name: u, user: {token: t}}
contexts:
- {name: a, context: {cluster: a, user: u, namespace: team-a}}
- {name: b, context: {cluster: b, user: u, namespace: team-b}}
`

// explain finds the cluster and namespace as kubectl does: $KUBECONFIG,
// else ~/.kube/config; --context picks a context; the namespace is the
// context's.
func TestExplainLoadsKubeconfigLikeKubectl(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config")
	if err := os.WriteFile(path, []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(desc, context, wantHost, wantNS string) {
		t.Helper()
		cc := kubectlConfig("", context)
		cfg, err := cc.ClientConfig()
		if err != nil {
			t.Fatalf("%s: %v", desc, err)
		}
		ns, _, err := cc.Namespace()
		if err != nil {
			t.Fatalf("%s: %v", desc, err)
		}
		if cfg.Host != wantHost || ns != wantNS {
			t.Errorf("%s: host %s namespace %s, want %s %s", desc, cfg.Host, ns, wantHost, wantNS)
		}
	}
	t.Setenv("KUBECONFIG", path)
	t.Setenv("HOME", t.TempDir())
	check("$KUBECONFIG, current context", "", "https://127.0.0.1:1001", "team-a")
	check("$KUBECONFIG, --context b", "b", "https://127.0.0.1:1002", "team-b")

	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".kube", "config"), []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", "")
	// clientcmd resolves ~ once, when the process starts; a kubectl or an
	// explain started with this HOME would read this file.
	defer func(was string) { clientcmd.RecommendedHomeFile = was }(clientcmd.RecommendedHomeFile)
	clientcmd.RecommendedHomeFile = filepath.Join(home, ".kube", "config")
	check("~/.kube/config", "", "https://127.0.0.1:1001", "team-a")
}

func controllerDeployment(ns string, args ...string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "sidecar-terminator", Namespace: ns,
			Labels: map[string]string{"app.kubernetes.io/name": "sidecar-terminator"}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "controller", Args: args}}}}},
	}
}

// The settings come from the running controller: its process when explain
// runs beside it, else its Deployment's args (flags that do not change a
// decision, like -v, are skipped), else the defaults, and each says so.
func TestControllerSettings(t *testing.T) {
	ctx := context.Background()
	dep := controllerDeployment("ops", "--leader-elect=true", "--virtual-node-selector=kind=serverless",
		"--quick-exit-image-allowlist=registry.example/qe,registry.example/qe2:v1", "--crr-deadline=90s", "--v=2")
	client := fake.NewClientset(dep)

	o, src := controllerSettings(ctx, client, "", filepath.Join(t.TempDir(), "no-such-cmdline"))
	if o.VirtualNodeSelector != "kind=serverless" || len(o.QuickExitAllowlist) != 2 || o.CRRDeadline != 90*time.Second {
		t.Errorf("settings from the Deployment: %+v", *o)
	}
	if src != "from Deployment ops/sidecar-terminator" {
		t.Errorf("source %q", src)
	}

	cmdline := filepath.Join(t.TempDir(), "cmdline")
	if err := os.WriteFile(cmdline, []byte("/sidecar-terminator\x00--virtual-node-selector=x=y\x00--v=1\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, src = controllerSettings(ctx, client, "", cmdline)
	if o.VirtualNodeSelector != "x=y" || !strings.Contains(src, "controller process") {
		t.Errorf("in the controller's container: %q from %q", o.VirtualNodeSelector, src)
	}
	// An explain process at that path is not the controller.
	if err := os.WriteFile(cmdline, []byte("/sidecar-terminator\x00explain\x00p\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, src = controllerSettings(ctx, client, "", cmdline); !strings.Contains(src, "Deployment") {
		t.Errorf("explain's own process taken for the controller: %q", src)
	}

	o, src = controllerSettings(ctx, fake.NewClientset(), "", cmdline)
	if o.VirtualNodeSelector != DefaultOptions().VirtualNodeSelector || !strings.HasPrefix(src, "defaults (no Deployment") {
		t.Errorf("no controller: %q from %q", o.VirtualNodeSelector, src)
	}
}

// A setting given on explain's command line wins; the others stay the
// running controller's.
func TestExplainFlagsOverrideOnlyWhenGiven(t *testing.T) {
	cmd := newExplainCommand()
	if err := cmd.Flags().Parse([]string{"--crr-deadline=2m", "--default-quick-exit-image=q.example/qe:1", "--kruise-daemon-grace=30s", "p"}); err != nil {
		t.Fatal(err)
	}
	running, err := parseControllerArgs([]string{"--virtual-node-selector=kind=serverless", "--crr-deadline=90s"})
	if err != nil {
		t.Fatal(err)
	}
	var given *Options
	for _, name := range settingFlags {
		if cmd.Flags().Lookup(name) == nil {
			t.Fatalf("explain has no --%s", name)
		}
	}
	given = DefaultOptions()
	given.CRRDeadline = 2 * time.Minute
	given.DefaultQuickExitImage = "q.example/qe:1"
	given.KruiseDaemonGrace = 30 * time.Second
	given.VirtualNodeSelector = "must-not-apply=1"
	applyOverrides(running, given, cmd.Flags())
	if running.CRRDeadline != 2*time.Minute || running.VirtualNodeSelector != "kind=serverless" || running.DefaultQuickExitImage != "q.example/qe:1" {
		t.Errorf("after overrides: deadline %s selector %q default image %q", running.CRRDeadline, running.VirtualNodeSelector, running.DefaultQuickExitImage)
	}
	if running.KruiseDaemonGrace != 30*time.Second {
		t.Errorf("after overrides: kruise-daemon grace %s, want 30s", running.KruiseDaemonGrace)
	}
}

// For a finished pod, which the controller no longer looks at, explain
// still shows how the containers are marked, and the controller's last
// events on the pod: its last decision.
func TestExplainFinishedPodShowsMarksAndLastEvents(t *testing.T) {
	pod := podtest.Pod("done").UID("u1").Node("n").Phase(corev1.PodSucceeded).
		Container("main", podtest.Exited(0, podtest.Epoch)).
		Container("proxy", podtest.Env(decision.EnvTerminate, "true"), podtest.Exited(0, podtest.Epoch.Add(time.Second))).Build()
	ev := func(name, reason, msg string, at time.Time, component string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "done", UID: "u1"},
			Reason:         reason, Message: msg, Type: corev1.EventTypeNormal, Count: 1,
			Source: corev1.EventSource{Component: component}, LastTimestamp: metav1.NewTime(at)}
	}
	client := fake.NewClientset(pod,
		ev("e2", "SidecarTerminating", "Stopping sidecars [proxy]: created ContainerRecreateRequest done-x-st1 (attempt 1)", podtest.Epoch.Add(2*time.Second), "sidecar-terminator"),
		ev("e1", "Scheduled", "Successfully assigned", podtest.Epoch, "default-scheduler"))
	cfg, err := DefaultOptions().ReconcilerConfig()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	read := kube.LiveReader{Client: client}
	if err := explainPod(context.Background(), &out, client, read, cfg, "defaults", "default", "done"); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !regexp.MustCompile(`proxy\s+sidecar\s+terminated\(0\)`).MatchString(got) {
		t.Errorf("explain does not show the finished sidecar:\n%s", got)
	}
	for _, want := range []string{"KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT", "Decision: Ignored",
		"SidecarTerminating", "created ContainerRecreateRequest done-x-st1"} {
		if !strings.Contains(got, want) {
			t.Errorf("explain lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Scheduled") {
		t.Errorf("explain shows another component's event:\n%s", got)
	}
}
