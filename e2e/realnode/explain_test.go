package realnode

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
	"github.com/sidecar-terminator/sidecar-terminator/hack/docs"
	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
)

var updateExplain = flag.Bool("update-explain", false, "write this run's explain output to "+docs.ExplainGolden+" and docs/observability.md (make explain-golden)")

// The explain example in docs/observability.md is what the real command
// prints for a Job whose sidecar was stopped by a CRR on the real node: this
// runs that Job, runs the controller binary's explain as an operator would
// (a kubeconfig, no flags for the settings), and compares the output, with
// the pod's name, UID and times normalised, with the golden file the docs
// show. -update-explain writes it instead.
func TestExplainMatchesTheDocsExample(t *testing.T) {
	requireHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := harness.cluster
	kube, err := kubernetes.NewForConfig(c.RestConfig)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RestConfig)
	if err != nil {
		t.Fatal(err)
	}
	cl := cases.Clients{Kube: kube, Dynamic: dyn}
	js := cases.JobSpec{Name: "report", Namespace: "explain-example", RestartPolicy: corev1.RestartPolicyNever,
		Containers: []cases.Container{cases.Main("main", 2, 0), cases.Sidecar("log-shipper", "exit:0", true)}}
	if err := cases.CreateNamespace(ctx, kube, js.Namespace); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.BatchV1().Jobs(js.Namespace).Create(ctx, js.Build(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	obs := cases.RunAndCheck(ctx, t, cl, js.Namespace, js.Name, 3*time.Minute, cases.Expect{Job: batchv1.JobComplete, Phase: corev1.PodSucceeded,
		ExitCodes: map[string]int32{"main": 0, "log-shipper": 0}, CRRContainers: []string{"log-shipper"}, Event: true})
	if obs.Pod == nil {
		t.Fatal("the Job completed but its pod is gone; explain needs it")
	}
	out, err := exec.CommandContext(ctx, harness.bin, "explain", "-n", js.Namespace, obs.Pod.Name, "--kubeconfig", c.Kubeconfig).CombinedOutput()
	if err != nil {
		t.Fatalf("explain: %v\n%s", err, out)
	}
	got := docs.NormaliseExplain(string(out), js.Name, obs.Pod.Name, string(obs.Pod.UID))
	t.Logf("explain, normalised:\n%s", got)

	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join(root, docs.ExplainGolden)
	page := filepath.Join(root, "docs", "observability.md")
	if *updateExplain {
		writeExplainExample(t, golden, page, got)
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("explain's output differs from %s (after normalising names, UIDs and times); if the change is meant, run make explain-golden\n--- got\n%s\n--- want\n%s", docs.ExplainGolden, got, want)
	}
}

func writeExplainExample(t *testing.T, golden, page, example string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(golden, []byte(example), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	updated, err := docs.WithExplainExample(string(doc), example)
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	if err := os.WriteFile(page, []byte(updated), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s and the example in %s", golden, page)
}
