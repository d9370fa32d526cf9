package deploy

// The chart as the Helm ecosystem expects it: a subchart with global
// values, a kubeVersion the suites prove, a README helm shows, a `helm
// test` hook, Artifact Hub metadata.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"
)

// chartMeta is the part of Chart.yaml read here.
type chartMeta struct {
	Version     string            `json:"version"`
	AppVersion  string            `json:"appVersion"`
	KubeVersion string            `json:"kubeVersion"`
	Icon        string            `json:"icon"`
	Annotations map[string]string `json:"annotations"`
}

func readChartMeta(t *testing.T) chartMeta {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(ChartDir(repoRoot(t)), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m chartMeta
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// A parent chart that depends on this one and sets global values renders:
// the schema admits `global`, which Helm hands every subchart.
func TestChartRendersAsASubchartWithGlobalValues(t *testing.T) {
	helm, src := helmBinary(t), ChartDir(repoRoot(t))
	parent := filepath.Join(t.TempDir(), "platform")
	if err := os.CopyFS(filepath.Join(parent, "charts", ReleaseName), os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	meta := readChartMeta(t)
	files := map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: platform\nversion: 1.0.0\ndependencies:\n  - name: " + ReleaseName +
			"\n    version: " + meta.Version + "\n",
		"values.yaml": "global:\n  imageRegistry: registry.example.com\n  imagePullSecrets: [pull]\n  storageClass: fast\n" +
			ReleaseName + ":\n  replicaCount: 3\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(parent, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(helm, "template", "platform", parent, "--namespace", Namespace).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template of a parent chart with global values: %v\n%s", err, out)
	}
	objs, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	dep := typed[appsv1.Deployment](t, only(t, objs, "Deployment"))
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 3 {
		t.Errorf("the parent's value for the subchart did not arrive: replicas %v", dep.Spec.Replicas)
	}
	if out, err := exec.Command(helm, "lint", "--strict", parent).CombinedOutput(); err != nil {
		t.Errorf("helm lint --strict of the parent: %v\n%s", err, out)
	}
}

// kubeVersion admits exactly the releases the suites run on and newer:
// its lower bound is the oldest of e2e/cluster.SupportedKubernetes (read
// from its source: the chart's tests do not build the cluster harness).
func TestKubeVersionIsTheOldestReleaseTheSuitesRun(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "e2e", "cluster", "build.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`SupportedKubernetes = \[\]string\{([^}]*)\}`).FindSubmatch(src)
	if m == nil {
		t.Fatal("e2e/cluster/build.go no longer lists SupportedKubernetes as this test reads it")
	}
	var minors []string
	for _, v := range regexp.MustCompile(`"v(\d+\.\d+)\.\d+"`).FindAllSubmatch(m[1], -1) {
		minors = append(minors, string(v[1]))
	}
	sort.Slice(minors, func(i, j int) bool { return minorLess(minors[i], minors[j]) })
	if len(minors) == 0 {
		t.Fatal("no supported Kubernetes release found")
	}
	if got, want := readChartMeta(t).KubeVersion, ">="+minors[0]+".0-0"; got != want {
		t.Errorf("kubeVersion %q, want %q: the oldest release the suites run is %s", got, want, minors[0])
	}
}

func minorLess(a, b string) bool {
	var am, an, bm, bn int
	_, _ = fmt.Sscanf(a, "%d.%d", &am, &an)
	_, _ = fmt.Sscanf(b, "%d.%d", &bm, &bn)
	return am < bm || am == bm && an < bn
}

// `helm show readme` is the chart's README: what it is, how to install,
// and a table of every value (checked against values.yaml both ways).
func TestChartReadmeShowsAndListsEveryValue(t *testing.T) {
	helm, chart := helmBinary(t), ChartDir(repoRoot(t))
	out, err := exec.Command(helm, "show", "readme", chart).Output()
	if err != nil {
		t.Fatal(err)
	}
	readme := string(out)
	for _, want := range []string{"# sidecar-terminator", "helm install sidecar-terminator oci://", "helm test sidecar-terminator", "## Values"} {
		if !strings.Contains(readme, want) {
			t.Errorf("helm show readme lacks %q", want)
		}
	}
	raw, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	var want []string
	leafKeys("", values, &want)
	sort.Strings(want)
	var got []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Za-z.]+)` \\|").FindAllStringSubmatch(readme, -1) {
		got = append(got, m[1])
	}
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the chart README's values table\n %v\nvalues.yaml\n %v", got, want)
	}
}

// The `helm test` hook is a Job whose main exits and whose sidecar runs
// until stopped, marked for both paths (a CRR where kruise-daemon runs, the
// quick-exit image elsewhere), with a quick-exit image the chart's own
// allowlist and admission policy let the controller swap in; its images
// follow tests.* (tag appVersion, or a digest as a pushed chart pins).
func TestHelmTestHookIsAJobOnlyTheControllerCompletes(t *testing.T) {
	meta := readChartMeta(t)
	hook := func(args ...string) *batchv1.Job {
		var jobs []*batchv1.Job
		for _, o := range render(t, args...) {
			if o.GetKind() == "Job" {
				if o.GetAnnotations()["helm.sh/hook"] != "test" {
					t.Errorf("Job %s is not a test hook", o.GetName())
				}
				jobs = append(jobs, typed[batchv1.Job](t, o))
			}
		}
		if len(jobs) != 1 {
			t.Fatalf("%d test Jobs, want 1", len(jobs))
		}
		return jobs[0]
	}
	job := hook()
	pod := job.Spec.Template.Spec
	if len(pod.Containers) != 2 || pod.RestartPolicy != "Never" {
		t.Fatalf("test pod: %d containers, restartPolicy %s; want a main and a sidecar, Never", len(pod.Containers), pod.RestartPolicy)
	}
	main, side := pod.Containers[0], pod.Containers[1]
	if len(main.Env) != 0 || main.Args[0] != "main" || side.Args[0] != "sidecar" {
		t.Errorf("main %v %v, sidecar %v: want an unmarked main and a workload sidecar", main.Args, main.Env, side.Args)
	}
	env := map[string]string{}
	for _, e := range side.Env {
		env[e.Name] = e.Value
	}
	wantImage := "ghcr.io/sidecar-terminator/workload:" + meta.AppVersion
	if main.Image != wantImage || side.Image != wantImage {
		t.Errorf("test images %s, %s, want %s", main.Image, side.Image, wantImage)
	}
	qe := env["KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE"]
	if env["KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT"] != "true" || qe != "ghcr.io/sidecar-terminator/quick-exit:"+meta.AppVersion {
		t.Errorf("sidecar marks %v", env)
	}
	dep := typed[appsv1.Deployment](t, only(t, render(t), "Deployment"))
	o, _ := controllerFlags(t, dep)
	allowed := false
	for _, a := range o.QuickExitAllowlist {
		allowed = allowed || qe == a || strings.HasPrefix(qe, a+":") || strings.HasPrefix(qe, a+"@")
	}
	if !allowed {
		t.Errorf("the test's quick-exit image %s is not in the chart's allowlist %v", qe, o.QuickExitAllowlist)
	}
	d := "sha256:" + strings.Repeat("c", 64)
	pinned := hook("--set", "tests.image.repository=reg.example/w", "--set", "tests.image.digest="+d)
	if got := pinned.Spec.Template.Spec.Containers[0].Image; got != "reg.example/w@"+d {
		t.Errorf("pinned test image %s", got)
	}
}

// Artifact Hub reads the chart's icon, license, links, images and
// category from Chart.yaml; the icon's URL names a file in this chart.
func TestArtifactHubMetadata(t *testing.T) {
	meta := readChartMeta(t)
	const raw = "https://raw.githubusercontent.com/sidecar-terminator/sidecar-terminator/main/"
	if !strings.HasPrefix(meta.Icon, raw) {
		t.Fatalf("icon %q is not a file of the repository's main branch", meta.Icon)
	}
	if _, err := os.Stat(filepath.Join(repoRoot(t), strings.TrimPrefix(meta.Icon, raw))); err != nil {
		t.Errorf("icon %s: %v", meta.Icon, err)
	}
	a := meta.Annotations
	if a["artifacthub.io/license"] != "Apache-2.0" {
		t.Errorf("license annotation %q", a["artifacthub.io/license"])
	}
	categories := map[string]bool{"ai-machine-learning": true, "database": true, "integration-delivery": true, "monitoring-logging": true,
		"networking": true, "security": true, "storage": true, "streaming-messaging": true}
	if !categories[a["artifacthub.io/category"]] {
		t.Errorf("category %q is not one Artifact Hub knows", a["artifacthub.io/category"])
	}
	var links []struct{ Name, URL string }
	if err := yaml.Unmarshal([]byte(a["artifacthub.io/links"]), &links); err != nil || len(links) == 0 {
		t.Errorf("links annotation %q: %v", a["artifacthub.io/links"], err)
	}
	var imgs []struct{ Name, Image string }
	if err := yaml.Unmarshal([]byte(a["artifacthub.io/images"]), &imgs); err != nil {
		t.Fatal(err)
	}
	// The images the chart runs by default, at appVersion.
	want := map[string]bool{"ghcr.io/sidecar-terminator/controller:" + meta.AppVersion: true,
		"ghcr.io/sidecar-terminator/quick-exit:" + meta.AppVersion: true, "ghcr.io/sidecar-terminator/workload:" + meta.AppVersion: true}
	for _, i := range imgs {
		if !want[i.Image] {
			t.Errorf("images annotation names %s, not an image of the chart at appVersion", i.Image)
		}
		delete(want, i.Image)
	}
	if len(want) != 0 {
		t.Errorf("images annotation lacks %v", want)
	}
}

// NOTES.txt says whether the NetworkPolicy is on and who may reach the
// metrics port, for the defaults and for a narrowed metricsFrom.
func TestNotesSayWhoMayScrapeMetrics(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "admits pods in any namespace"},
		{[]string{"--set", "networkPolicy.metricsFrom[0].podSelector.matchLabels.app=prom"}, "only the peers in networkPolicy.metricsFrom"},
		{[]string{"--set", "networkPolicy.enabled=false"}, "NetworkPolicy: off"},
	} {
		if notes := renderNotes(t, tc.args...); !strings.Contains(notes, tc.want) {
			t.Errorf("NOTES with %v lack %q:\n%s", tc.args, tc.want, notes)
		}
	}
}

// renderNotes renders NOTES.txt (which `helm template` leaves out) from a
// copy of the chart in which it is a template's text.
func renderNotes(t *testing.T, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), ReleaseName)
	if err := os.CopyFS(dir, os.DirFS(ChartDir(repoRoot(t)))); err != nil {
		t.Fatal(err)
	}
	notes := filepath.Join(dir, "templates", "NOTES.txt")
	raw, err := os.ReadFile(notes)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(notes); err != nil {
		t.Fatal(err)
	}
	tpl := "{{- define \"notes-under-test\" -}}\n" + string(raw) + "\n{{- end }}\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "_notes.tpl"), []byte(tpl), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "templates", "notes.yaml"), []byte("notes: |\n{{ include \"notes-under-test\" . | indent 2 }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"template", ReleaseName, dir, "--namespace", Namespace, "--show-only", "templates/notes.yaml"}, args...)
	out, err := exec.CommandContext(context.Background(), helmBinary(t), argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("render NOTES: %v\n%s", err, out)
	}
	var doc struct{ Notes string }
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Notes
}
