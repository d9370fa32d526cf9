// Package secondterminator runs the controller beside OpenKruise's own
// SidecarTerminator (its feature gate on) on the local real cluster, which
// the README says not to do, and checks what it says it does then: it
// notices, says so, and yields rather than make a second CRR. Needs root;
// see e2e/README.md.
//
//	go test ./e2e/secondterminator -count=1 -timeout 20m -v
package secondterminator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cases"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster/clustertest"
)

func job(ns, name string) cases.JobSpec {
	return cases.JobSpec{Name: name, Namespace: ns, Containers: []cases.Container{
		cases.Main("main", 3, 0), cases.Sidecar("proxy", "exit:0", true)}}
}

// OpenKruise's terminator alone stops the first Job's sidecar (the
// controller is not running yet). The controller, started then, finds its
// event and logs that it acts in the cluster; for the second Job it waits
// for kruise's CRR, makes none of its own, and warns on the pod.
func TestBesideKruisesSidecarTerminator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	e := clustertest.Up(ctx, t, cluster.UpOptions{Kruise: cluster.KruiseOptions{SidecarTerminator: true}})
	c, bin, cl := e.Cluster, e.Bin, e.Clients
	kube, dyn := cl.Kube, cl.Dynamic
	// A namespace per Job: a watched run sees its namespace's pods.
	const ns, ns2 = "kruise-alone", "both-terminators"
	for _, n := range []string{ns, ns2} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	first, err := cases.RunWatched(ctx, cl, job(ns, "kruise-alone").Build(), 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	p1 := first.OnlyPod(t)
	if first.Job.Status.Succeeded != 1 {
		t.Fatalf("first Job (OpenKruise's terminator alone) did not succeed:\n%s", first.Describe())
	}
	if err := cases.WaitForPodEvent(ctx, kube, p1, corev1.EventTypeNormal, "SidecarTerminator", time.Minute); err != nil {
		t.Fatalf("OpenKruise's terminator did not act: %v", err)
	}

	ctl, err := c.StartController(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	const startLine = "OpenKruise's own SidecarTerminator acts in this cluster"
	if err := waitForLog(ctx, ctl.Process.LogPath, startLine, time.Minute); err != nil {
		t.Fatal(err)
	}

	second, err := cases.RunWatched(ctx, cl, job(ns2, "both").Build(), 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	p2 := second.OnlyPod(t)
	if second.Job.Status.Succeeded != 1 {
		t.Fatalf("second Job did not succeed:\n%s", second.Describe())
	}
	if err := cases.WaitForPodEvent(ctx, kube, p2, corev1.EventTypeWarning, "SecondTerminator", time.Minute); err != nil {
		t.Fatal(err)
	}
	if len(second.CRRs) != 0 {
		t.Errorf("the controller made CRRs %v beside OpenKruise's own for the same sidecar", second.CRRs)
	}
	if ours, err := cases.CRRsForPod(ctx, dyn, ns2, p2.Name); err != nil || len(ours) != 0 {
		t.Errorf("the controller's CRRs for %s: %d (%v), want none", p2.Name, len(ours), err)
	}
	if _, err := dyn.Resource(cases.CRRResource).Namespace(ns2).Get(ctx, "sidecar-termination-"+string(p2.UID), metav1.GetOptions{}); err != nil {
		t.Errorf("OpenKruise's CRR for %s: %v", p2.Name, err)
	}
	if got := metric(ctx, t, ctl.MetricsURL, "sidecar_terminator_second_terminator_pods_total"); got != "1" {
		t.Errorf("sidecar_terminator_second_terminator_pods_total = %q, want 1", got)
	}
}

func waitForLog(ctx context.Context, path, line string, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		b, err := os.ReadFile(path)
		return err == nil && strings.Contains(string(b), line), nil
	})
	if err != nil {
		return fmt.Errorf("no %q in %s after %s: %w", line, path, timeout, err)
	}
	return nil
}

// metric reads one unlabelled sample from the controller's /metrics.
func metric(ctx context.Context, t *testing.T, url, name string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(body), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == name {
			return f[1]
		}
	}
	return ""
}
