package deploy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sidecar-terminator/sidecar-terminator/controller/app"
	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/kube"
)

func TestHelmLint(t *testing.T) {
	helm, chart := helmBinary(t), ChartDir(repoRoot(t))
	for name, args := range map[string][]string{
		"defaults":       nil,
		"serviceMonitor": {"--set", "metrics.serviceMonitor.enabled=true"},
		"prometheusRule": {"--set", "metrics.prometheusRule.enabled=true"},
		"singleReplica":  {"--set", "replicaCount=1", "--set", "leaderElection.enabled=false"},
		"global":         {"--set", "global.imageRegistry=registry.example.com", "--set", "flowControl.enabled=true"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command(helm, append([]string{"lint", "--strict", chart}, args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
		})
	}
}

// The schema turns a typo in a values file into an install error instead of
// a silently ignored setting.
func TestValuesSchemaRejectsUnknownAndMistypedValues(t *testing.T) {
	helm, chart := helmBinary(t), ChartDir(repoRoot(t))
	for _, set := range []string{"replicas=3", "kubeAPI.qps=0", "kubeAPI.burst=0", "crr.deadline=soon", "image.pullPolicy=Sometimes", "quickExitImageAllowlist=x"} {
		_, err := Template(context.Background(), helm, chart, "st-test", "--set", set)
		if err == nil {
			t.Errorf("--set %s rendered; want a schema error", set)
		}
	}
}

type grant struct{ group, resource, verb string }

func grantsOf(t *testing.T, rules []rbacv1.PolicyRule) []string {
	t.Helper()
	set := map[string]bool{}
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
			t.Errorf("unexpected rule shape %+v", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if g == "*" || res == "*" || v == "*" || strings.Contains(res, "*") {
						t.Errorf("wildcard in rule %+v", r)
					}
					set[g+"/"+res+":"+v] = true
				}
			}
		}
	}
	return sortedSet(set)
}

func permissionGrants(namespaced bool) []string {
	set := map[string]bool{}
	for _, p := range kube.Permissions {
		if p.Namespaced == namespaced {
			for _, v := range p.Verbs {
				set[p.Group+"/"+p.Resource+":"+v] = true
			}
		}
	}
	return sortedSet(set)
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The chart grants exactly what the code calls: cluster-wide for pods,
// nodes, CRRs and events, and leases in the release namespace only, all to
// the ServiceAccount the Deployment runs as.
func TestRBACEqualsWhatTheCodeNeeds(t *testing.T) {
	objs := render(t)
	cr := typed[rbacv1.ClusterRole](t, only(t, objs, "ClusterRole"))
	role := typed[rbacv1.Role](t, only(t, objs, "Role"))
	if got, want := grantsOf(t, cr.Rules), permissionGrants(false); !reflect.DeepEqual(got, want) {
		t.Errorf("ClusterRole grants\n %v\nthe code needs\n %v", got, want)
	}
	if got, want := grantsOf(t, role.Rules), permissionGrants(true); !reflect.DeepEqual(got, want) {
		t.Errorf("Role grants\n %v\nthe code needs\n %v", got, want)
	}
	if role.Namespace != "st-test" {
		t.Errorf("leases Role in namespace %q, want the release namespace", role.Namespace)
	}

	dep := typed[appsv1.Deployment](t, only(t, objs, "Deployment"))
	sa := only(t, objs, "ServiceAccount")
	if dep.Spec.Template.Spec.ServiceAccountName != sa.GetName() {
		t.Errorf("Deployment runs as %q, chart creates ServiceAccount %q", dep.Spec.Template.Spec.ServiceAccountName, sa.GetName())
	}
	crb := typed[rbacv1.ClusterRoleBinding](t, only(t, objs, "ClusterRoleBinding"))
	rb := typed[rbacv1.RoleBinding](t, only(t, objs, "RoleBinding"))
	for _, b := range []struct {
		name     string
		ref      rbacv1.RoleRef
		subjects []rbacv1.Subject
		role     string
	}{
		{"ClusterRoleBinding", crb.RoleRef, crb.Subjects, cr.Name},
		{"RoleBinding", rb.RoleRef, rb.Subjects, role.Name},
	} {
		if b.ref.Name != b.role {
			t.Errorf("%s refers to %q, want %q", b.name, b.ref.Name, b.role)
		}
		want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.GetName(), Namespace: "st-test"}}
		if !reflect.DeepEqual(b.subjects, want) {
			t.Errorf("%s subjects %+v, want %+v", b.name, b.subjects, want)
		}
	}
}

func TestPodIsHardened(t *testing.T) {
	dep := typed[appsv1.Deployment](t, only(t, render(t), "Deployment"))
	pod := dep.Spec.Template.Spec
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("pod securityContext.runAsNonRoot not true: %+v", psc)
	}
	if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Errorf("pod runs as %v, want distroless nonroot 65532", psc)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod seccomp profile not RuntimeDefault: %+v", psc)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC || len(pod.Volumes) > 0 {
		t.Errorf("pod uses host namespaces or volumes: %+v", pod)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("container has no securityContext")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("root filesystem is writable")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("privilege escalation allowed")
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("privileged")
	case sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities %+v, want drop ALL and add none", sc.Capabilities)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want cpu and memory requests and a memory limit", c.Resources)
	}
	if c.LivenessProbe == nil || c.ReadinessProbe == nil {
		t.Error("missing liveness or readiness probe")
	}
}

// Two replicas with a PodDisruptionBudget that keeps one, a metrics Service
// that reaches the container's metrics port, and no ServiceMonitor unless
// asked for.
func TestAvailabilityAndMetricsObjects(t *testing.T) {
	objs := render(t)
	dep := typed[appsv1.Deployment](t, only(t, objs, "Deployment"))
	podLabels := labels.Set(dep.Spec.Template.Labels)
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", dep.Spec.Replicas)
	}
	pdb := typed[policyv1.PodDisruptionBudget](t, only(t, objs, "PodDisruptionBudget"))
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PDB minAvailable %v, want 1", pdb.Spec.MinAvailable)
	}
	if !labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(podLabels) {
		t.Errorf("PDB selector %v does not select the pods %v", pdb.Spec.Selector.MatchLabels, podLabels)
	}
	svc := typed[corev1.Service](t, only(t, objs, "Service"))
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
		t.Errorf("Service selector %v does not select the pods %v", svc.Spec.Selector, podLabels)
	}
	var metricsPort int32
	for _, p := range dep.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == svc.Spec.Ports[0].TargetPort.String() {
			metricsPort = p.ContainerPort
		}
	}
	if metricsPort == 0 {
		t.Errorf("Service targets port %q, which the container does not name", svc.Spec.Ports[0].TargetPort.String())
	}
	if got := flagValue(t, dep, "metrics-bind-address"); got != ":8080" || metricsPort != 8080 {
		t.Errorf("metrics bound at %q, container port %d", got, metricsPort)
	}
	if n := count(objs, "ServiceMonitor"); n != 0 {
		t.Errorf("%d ServiceMonitors by default, want 0", n)
	}

	objs = render(t, "--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.labels.release=prom")
	sm := only(t, objs, "ServiceMonitor")
	if sm.GetLabels()["release"] != "prom" {
		t.Errorf("ServiceMonitor labels %v lack release=prom", sm.GetLabels())
	}
	endpoints, _, _ := unstructuredSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != "metrics" {
		t.Errorf("ServiceMonitor endpoints %v, want port metrics", endpoints)
	}

	objs = render(t, "--set", "replicaCount=1")
	if n := count(objs, "PodDisruptionBudget"); n != 0 {
		t.Errorf("a PDB with one replica would block every drain; rendered %d", n)
	}
}

// controllerFlags parses the Deployment's args with the binary's own flag
// definitions: an arg the binary does not know fails the test.
func controllerFlags(t *testing.T, dep *appsv1.Deployment) (*app.Options, *pflag.FlagSet) {
	t.Helper()
	args := dep.Spec.Template.Spec.Containers[0].Args
	if err := app.NewCommand().ParseFlags(args); err != nil {
		t.Fatalf("the binary rejects the chart's args %q: %v", args, err)
	}
	o := app.DefaultOptions()
	fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	o.AddFlags(fs)
	fs.Int("v", 0, "klog verbosity, registered by the command")
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return o, fs
}

func flagValue(t *testing.T, dep *appsv1.Deployment, name string) string {
	t.Helper()
	_, fs := controllerFlags(t, dep)
	f := fs.Lookup(name)
	if f == nil {
		t.Fatalf("no flag %s", name)
	}
	return f.Value.String()
}

// With default values the chart runs the binary with its own defaults, plus
// leader election scoped to the release, and metrics on the pod's address
// for its Service (the binary alone keeps them on loopback; the chart's
// NetworkPolicy guards the port).
func TestDefaultValuesMatchTheBinaryDefaults(t *testing.T) {
	dep := typed[appsv1.Deployment](t, only(t, render(t), "Deployment"))
	got, _ := controllerFlags(t, dep)
	want := app.DefaultOptions()
	want.LeaderElectNamespace = "st-test"
	want.LeaderElectName = ReleaseName
	want.MetricsBindAddress = ":8080"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("options from the chart\n %+v\nbinary defaults\n %+v", *got, *want)
	}
}

func TestValuesAreWiredToFlags(t *testing.T) {
	dep := typed[appsv1.Deployment](t, only(t, render(t,
		"--set", "virtualNodeSelector=node.kubernetes.io/virtual=true",
		"--set", "quickExitImageAllowlist={ghcr.io/acme/quick-exit,registry.example/qe:v1}",
		"--set", "defaultQuickExitImage=ghcr.io/acme/quick-exit:v2",
		"--set", "crr.deadline=90s", "--set", "crr.maxAttempts=5", "--set", "crr.retryBackoff=2s", "--set", "crr.ttlAfterFinished=1h",
		"--set", "kruiseDaemonGrace=2m",
		"--set", "workers=8", "--set", "kubeAPI.qps=20", "--set", "kubeAPI.burst=40", "--set", "logVerbosity=4",
		"--set", "metrics.port=9090", "--set", "health.port=9091",
		"--set", "leaderElection.leaseDuration=30s",
		"--set", "image.repository=registry.example/st", "--set", "image.tag=v9",
	), "Deployment"))
	o, fs := controllerFlags(t, dep)
	checks := map[string][2]any{
		"virtual-node-selector":       {o.VirtualNodeSelector, "node.kubernetes.io/virtual=true"},
		"quick-exit-image-allowlist":  {o.QuickExitAllowlist, []string{"ghcr.io/acme/quick-exit", "registry.example/qe:v1"}},
		"default-quick-exit-image":    {o.DefaultQuickExitImage, "ghcr.io/acme/quick-exit:v2"},
		"crr-deadline":                {o.CRRDeadline, 90 * time.Second},
		"crr-max-attempts":            {o.CRRMaxAttempts, 5},
		"crr-retry-backoff":           {o.CRRRetryBackoff, 2 * time.Second},
		"crr-ttl-after-finished":      {o.CRRTTLAfterFinished, time.Hour},
		"kruise-daemon-grace":         {o.KruiseDaemonGrace, 2 * time.Minute},
		"workers":                     {o.Workers, 8},
		"kube-api-qps":                {o.QPS, float32(20)},
		"kube-api-burst":              {o.Burst, 40},
		"metrics-bind-address":        {o.MetricsBindAddress, ":9090"},
		"health-probe-bind-address":   {o.HealthProbeBindAddress, ":9091"},
		"leader-elect-lease-duration": {o.LeaseDuration, 30 * time.Second},
		"v":                           {fs.Lookup("v").Value.String(), "4"},
	}
	for flag, c := range checks {
		if !reflect.DeepEqual(c[0], c[1]) {
			t.Errorf("--%s = %v, want %v", flag, c[0], c[1])
		}
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if c.Image != "registry.example/st:v9" {
		t.Errorf("image %q", c.Image)
	}
	for _, p := range c.Ports {
		if want := map[string]int32{"metrics": 9090, "health": 9091}[p.Name]; p.ContainerPort != want {
			t.Errorf("port %s = %d, want %d", p.Name, p.ContainerPort, want)
		}
	}

	dep = typed[appsv1.Deployment](t, only(t, render(t, "--set", "image.digest=sha256:"+strings.Repeat("ab", 32)), "Deployment"))
	if img := dep.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, "@sha256:"+strings.Repeat("ab", 32)) {
		t.Errorf("digest not used: %q", img)
	}
}

// Without leader election the chart neither asks the binary for it nor
// grants leases.
func TestLeaderElectionOff(t *testing.T) {
	objs := render(t, "--set", "leaderElection.enabled=false", "--set", "replicaCount=1")
	o, _ := controllerFlags(t, typed[appsv1.Deployment](t, only(t, objs, "Deployment")))
	if o.LeaderElect {
		t.Error("--leader-elect still true")
	}
	if n := count(objs, "Role") + count(objs, "RoleBinding"); n != 0 {
		t.Errorf("%d lease Role objects rendered without leader election", n)
	}
}

func unstructuredSlice(obj map[string]any, fields ...string) ([]any, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[f]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}

// The FlowSchema is the platform team's choice: none by default; when asked
// for, it names the controller's ServiceAccount, the recommended level, and
// every resource the controller reads or writes except events.
func TestFlowSchemaOptional(t *testing.T) {
	if n := count(render(t), "FlowSchema"); n != 0 {
		t.Errorf("%d FlowSchemas by default, want 0", n)
	}
	objs := render(t, "--set", "flowControl.enabled=true")
	fs := only(t, objs, "FlowSchema")
	// v1, served from 1.29 by every release kubeVersion admits, whatever
	// the capabilities helm sees: no fallback to a beta API they do not serve.
	if fs.GetAPIVersion() != "flowcontrol.apiserver.k8s.io/v1" {
		t.Errorf("FlowSchema is %s, want flowcontrol.apiserver.k8s.io/v1", fs.GetAPIVersion())
	}
	if src, err := os.ReadFile(filepath.Join(ChartDir(repoRoot(t)), "templates", "flowschema.yaml")); err != nil || strings.Contains(string(src), "v1beta") || strings.Contains(string(src), "Capabilities") {
		t.Errorf("templates/flowschema.yaml falls back on capabilities to a beta API (%v)", err)
	}
	sa := only(t, objs, "ServiceAccount")
	if level, _, _ := unstructured.NestedString(fs.Object, "spec", "priorityLevelConfiguration", "name"); level != "workload-high" {
		t.Errorf("priority level %q, want workload-high", level)
	}
	rules, _, _ := unstructuredSlice(fs.Object, "spec", "rules")
	if len(rules) != 1 {
		t.Fatalf("rules %v, want one", rules)
	}
	rule := rules[0].(map[string]any)
	subjects := rule["subjects"].([]any)
	subj := subjects[0].(map[string]any)["serviceAccount"].(map[string]any)
	if len(subjects) != 1 || subj["name"] != sa.GetName() || subj["namespace"] != sa.GetNamespace() {
		t.Errorf("subjects %v, want only ServiceAccount %s/%s", subjects, sa.GetNamespace(), sa.GetName())
	}
	covered := map[string]bool{}
	for _, r := range rule["resourceRules"].([]any) {
		rr := r.(map[string]any)
		for _, g := range rr["apiGroups"].([]any) {
			for _, res := range rr["resources"].([]any) {
				covered[g.(string)+"/"+res.(string)] = true
			}
		}
	}
	for _, p := range kube.Permissions {
		key := p.Group + "/" + p.Resource
		if p.Resource == "events" {
			if covered[key] {
				t.Errorf("events are in the FlowSchema; they should stay best-effort")
			}
			continue
		}
		if !covered[key] {
			t.Errorf("the controller uses %s, which the FlowSchema does not cover", key)
		}
	}
}

// TestAllowlistFailsClosed: the chart's default allows only the project's
// quick-exit image, '*' must be asked for, and an empty list reaches the
// binary as empty (no swap allowed) rather than falling back to a default.
func TestAllowlistFailsClosed(t *testing.T) {
	for name, tc := range map[string]struct {
		set  []string
		want []string
	}{
		"default":  {want: []string{decision.DefaultQuickExitRepository}},
		"any":      {set: []string{"--set", "quickExitImageAllowlist={*}"}, want: []string{decision.AllowAnyImage}},
		"none":     {set: []string{"--set", "quickExitImageAllowlist=null"}, want: []string{}},
		"explicit": {set: []string{"--set", "quickExitImageAllowlist={registry.example/qe@sha256:" + strings.Repeat("a", 64) + "}"}, want: []string{"registry.example/qe@sha256:" + strings.Repeat("a", 64)}},
	} {
		t.Run(name, func(t *testing.T) {
			dep := typed[appsv1.Deployment](t, only(t, render(t, tc.set...), "Deployment"))
			o, _ := controllerFlags(t, dep)
			if !reflect.DeepEqual(o.QuickExitAllowlist, tc.want) {
				t.Errorf("allowlist %q, want %q", o.QuickExitAllowlist, tc.want)
			}
			cfg, err := o.ReconcilerConfig()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.Policy.AllowedQuickExitImages, tc.want) {
				t.Errorf("policy allowlist %q, want %q", cfg.Policy.AllowedQuickExitImages, tc.want)
			}
		})
	}
}

// TestAdmissionPolicyAlwaysRendered: the ServiceAccount's policy and
// binding are rendered whenever enabled, with or without the API server's
// capabilities (helm template, the kustomize base), name the chart's own
// ServiceAccount and allowlist, and can be turned off. Every release the
// chart's kubeVersion admits serves admissionregistration.k8s.io/v1.
func TestAdmissionPolicyAlwaysRendered(t *testing.T) {
	kinds := func(args ...string) map[string]string {
		out := map[string]string{}
		for _, o := range render(t, args...) {
			if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
				if o.GetAPIVersion() != "admissionregistration.k8s.io/v1" {
					t.Errorf("%s is %s, want admissionregistration.k8s.io/v1", o.GetKind(), o.GetAPIVersion())
				}
				b, _ := o.MarshalJSON()
				out[o.GetKind()] = string(b)
			}
		}
		return out
	}
	got := kinds("--set", "quickExitImageAllowlist={registry.example/qe}")
	if len(got) != 2 {
		t.Fatalf("rendered %d policy objects with no capabilities given (helm template), want 2", len(got))
	}
	for _, want := range []string{"system:serviceaccount:st-test:", "registry.example/qe", "kube-system", "SidecarTerminated"} {
		if !strings.Contains(got["ValidatingAdmissionPolicy"], want) {
			t.Errorf("policy lacks %q", want)
		}
	}
	if got := kinds("--set", "admissionPolicy.enabled=false"); len(got) != 0 {
		t.Errorf("rendered when disabled")
	}
}

// TestMetricsReachableByPrometheusByDefault: the chart binds /metrics to
// the pod's address for its Service; its NetworkPolicy opens only that port
// (beside the kubelet's health port) and, by default, to pods in any
// namespace, so a Prometheus wherever it runs scrapes what the
// ServiceMonitor names. networkPolicy.metricsFrom narrows it. The binary
// alone binds /metrics to loopback.
func TestMetricsReachableByPrometheusByDefault(t *testing.T) {
	metricsFrom := func(args ...string) ([]any, []any) {
		np := only(t, render(t, args...), "NetworkPolicy")
		rules, _, _ := unstructuredSlice(np.Object, "spec", "ingress")
		var from []any
		found := false
		for _, r := range rules {
			rule := r.(map[string]any)
			for _, p := range rule["ports"].([]any) {
				port := p.(map[string]any)["port"]
				if port == "metrics" {
					found = true
					from, _ = rule["from"].([]any)
					if len(rule["ports"].([]any)) != 1 {
						t.Errorf("the metrics rule opens more than the metrics port: %v", rule["ports"])
					}
				} else if port != "health" {
					t.Errorf("ingress opens port %v", port)
				}
			}
		}
		if !found {
			t.Fatalf("no ingress rule for the metrics port: %v", rules)
		}
		return from, rules
	}
	from, _ := metricsFrom("--set", "metrics.serviceMonitor.enabled=true")
	anyNamespace := []any{map[string]any{"namespaceSelector": map[string]any{}}}
	if !reflect.DeepEqual(from, anyNamespace) {
		t.Errorf("with the ServiceMonitor on, the metrics port admits %v, want pods in any namespace %v", from, anyNamespace)
	}
	from, _ = metricsFrom("--set", "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=monitoring")
	if len(from) != 1 || !strings.Contains(fmt.Sprint(from), "monitoring") {
		t.Errorf("metricsFrom not applied: %v", from)
	}
	if got := app.DefaultOptions().MetricsBindAddress; !strings.HasPrefix(got, "127.0.0.1:") {
		t.Errorf("the binary's default metrics address is %q, want loopback", got)
	}
}

// The PrometheusRule is off by default; on, it carries the labels a
// Prometheus selects rules by and the four alerts, each with the severity
// asked for, a `for:`, a runbook_url at docs/observability.md#<alert name in
// lower case> (under a base that can be changed), and every aggregation
// grouped by namespace. FailedKills counts only pods given up on, never
// sidecar_terminator_failed_kills_total (a kill a retry recovered counts
// there). (controller/deploy/promrules checks the rules themselves with
// Prometheus' rule parser.)
func TestPrometheusRuleOnlyWhenAskedFor(t *testing.T) {
	if n := count(render(t), "PrometheusRule"); n != 0 {
		t.Errorf("%d PrometheusRules by default, want 0", n)
	}
	const base = "https://docs.example.com/runbooks.md"
	for _, tc := range []struct {
		args    []string
		runbook string
	}{
		{nil, "https://github.com/sidecar-terminator/sidecar-terminator/blob/main/docs/observability.md"},
		{[]string{"--set", "metrics.prometheusRule.runbookBaseURL=" + base}, base},
	} {
		objs := render(t, append([]string{"--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.prometheusRule.labels.release=prom",
			"--set", "metrics.prometheusRule.severity=page"}, tc.args...)...)
		pr := only(t, objs, "PrometheusRule")
		if pr.GetLabels()["release"] != "prom" || pr.GetNamespace() != "st-test" {
			t.Errorf("PrometheusRule labels %v in %q, want release=prom in st-test", pr.GetLabels(), pr.GetNamespace())
		}
		groups, _, _ := unstructuredSlice(pr.Object, "spec", "groups")
		var alerts []string
		for _, g := range groups {
			rules, _, _ := unstructuredSlice(g.(map[string]any), "rules")
			for _, r := range rules {
				rule := r.(map[string]any)
				name := rule["alert"].(string)
				alerts = append(alerts, name)
				if sev := rule["labels"].(map[string]any)["severity"]; sev != "page" {
					t.Errorf("%s: severity %v, want page", name, sev)
				}
				if rule["for"] == nil || rule["for"] == "" {
					t.Errorf("%s has no for:", name)
				}
				if got, want := rule["annotations"].(map[string]any)["runbook_url"], tc.runbook+"#"+strings.ToLower(name); got != want {
					t.Errorf("%s: runbook_url %v, want %s", name, got, want)
				}
				expr := rule["expr"].(string)
				for _, agg := range regexp.MustCompile(`\b(sum|max|min|avg|count)\b\s*(by\s*\([^)]*\))?`).FindAllStringSubmatch(expr, -1) {
					if agg[2] != "by (namespace)" {
						t.Errorf("%s aggregates with %q, want by (namespace): %s", name, agg[0], expr)
					}
				}
				if strings.Contains(expr, "failed_kills") {
					t.Errorf("%s alerts on failed kills a retry may recover: %s", name, expr)
				}
			}
		}
		want := []string{"SidecarTerminatorFailedKills", "SidecarTerminatorSidecarsOutliveMains", "SidecarTerminatorDown", "SidecarTerminatorNoLeader"}
		if !reflect.DeepEqual(alerts, want) {
			t.Errorf("alerts %v, want %v", alerts, want)
		}
	}
}
