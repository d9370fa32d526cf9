package cases

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

// ControllerControl restarts the controller under test: a process on the
// real node harness, a pod deletion on kind.
type ControllerControl interface {
	RestartController(ctx context.Context) error
}

// BurstWithRestartFeature creates n Jobs at once and restarts the
// controller once a fifth of the pods have their CRR: every Job must still
// complete, with one CRR in flight per pod at any time (the restarted
// controller must not create a second one beside one it already made; a
// CRR whose kill failed is followed by the next attempt once it completed).
func BurstWithRestartFeature(ctl ControllerControl, n int) *features.FeatureBuilder {
	ns := "e2e-burst"
	return features.New(fmt.Sprintf("Burst of %d Jobs with a controller restart in the middle", n)).
		WithLabel("type", "burst").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			cl := mustClients(t, cfg)
			if err := CreateNamespace(ctx, cl.Kube, ns); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				js := JobSpec{Name: fmt.Sprintf("burst-%02d", i), Namespace: ns, RestartPolicy: never,
					Containers: []Container{Main("main", 2, 0), Sidecar("proxy", "exit:0", true)}}
				if _, err := cl.Kube.BatchV1().Jobs(ns).Create(ctx, js.Build(), metav1.CreateOptions{}); err != nil {
					t.Fatalf("create job %s: %v", js.Name, err)
				}
			}
			return ctx
		}).
		Assess("restart while CRRs are being created", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			cl := mustClients(t, cfg)
			deadline := time.Now().Add(5 * time.Minute)
			for {
				crrs, err := cl.Dynamic.Resource(CRRResource).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: ManagedByLabel})
				if err != nil {
					t.Fatal(err)
				}
				if len(crrs.Items) >= n/5 {
					t.Logf("restarting the controller with %d/%d CRRs created", len(crrs.Items), n)
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("only %d CRRs after 5 minutes", len(crrs.Items))
				}
				_ = sleep(ctx, 200*time.Millisecond)
			}
			if err := ctl.RestartController(ctx); err != nil {
				t.Fatalf("restart controller: %v", err)
			}
			return ctx
		}).
		Assess("all Jobs complete with one CRR in flight per pod", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			cl := mustClients(t, cfg)
			if err := waitAllJobs(ctx, cl, ns, n, 8*time.Minute); err != nil {
				t.Fatal(err)
			}
			pods, err := cl.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			crrs, err := cl.Dynamic.Resource(CRRResource).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: ManagedByLabel})
			if err != nil {
				t.Fatal(err)
			}
			// One stop in flight per pod: a pod's next CRR is made only
			// after its earlier one completed (kruise-daemon's kill failed,
			// the follow-through's attempt 2), never beside it, which is
			// what a restarted controller that forgot the first would do.
			perPod := map[string][]unstructured.Unstructured{}
			for _, c := range crrs.Items {
				p, _, _ := unstructured.NestedString(c.Object, "spec", "podName")
				perPod[p] = append(perPod[p], c)
			}
			for p, cs := range perPod {
				sort.Slice(cs, func(i, j int) bool {
					a, b := cs[i].GetCreationTimestamp(), cs[j].GetCreationTimestamp()
					return a.Before(&b)
				})
				for i := 1; i < len(cs); i++ {
					done, _, _ := unstructured.NestedString(cs[i-1].Object, "status", "completionTime")
					at, err := time.Parse(time.RFC3339, done)
					if err != nil || cs[i].GetCreationTimestamp().Time.Before(at) {
						t.Errorf("pod %s: CRR %s was made while %s was in flight (completed %q)", p, cs[i].GetName(), cs[i-1].GetName(), done)
					}
				}
				if len(cs) > 1 {
					t.Logf("pod %s: %d CRRs, each after the one before completed (a failed kill followed through)", p, len(cs))
				}
			}
			if len(pods.Items) != n {
				t.Errorf("%d pods for %d Jobs (backoffLimit 0: one each)", len(pods.Items), n)
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				if len(perPod[p.Name]) == 0 {
					t.Errorf("pod %s has no CRR", p.Name)
				}
				if p.Status.Phase != corev1.PodSucceeded {
					t.Errorf("pod %s phase %s", p.Name, p.Status.Phase)
				}
				for _, c := range []string{"main", "proxy"} {
					if code, ok := ExitCode(p, c); !ok || code != 0 {
						t.Errorf("pod %s container %s exit %d (terminated %v)", p.Name, c, code, ok)
					}
				}
			}
			// Events follow the actions: the controller defers them while it
			// is busy (up to 30 s), and a new leader records those an earlier
			// instance could not 10 s after it takes the lead. Jobs complete
			// before that, so wait for what is asserted, within a bound far
			// beyond both.
			var withEvent map[string]bool
			start := time.Now()
			for deadline := start.Add(3 * time.Minute); ; {
				evs, err := cl.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + ReasonSidecarTerminating})
				if err != nil {
					t.Fatal(err)
				}
				withEvent = map[string]bool{}
				for _, e := range evs.Items {
					withEvent[e.InvolvedObject.Name] = true
				}
				if len(withEvent) < n {
					t.Logf("%s after the Jobs completed: %d/%d pods have a %s event", time.Since(start).Round(time.Second), len(withEvent), n, ReasonSidecarTerminating)
				}
				if len(withEvent) >= n || time.Now().After(deadline) {
					break
				}
				if err := sleep(ctx, time.Second); err != nil {
					t.Fatal(err)
				}
			}
			if len(withEvent) != n {
				t.Errorf("%d pods have a %s event, want %d", len(withEvent), ReasonSidecarTerminating, n)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			js := JobSpec{Namespace: ns}
			return deleteNamespace(&js)(ctx, t, cfg)
		})
}

func waitAllJobs(ctx context.Context, cl Clients, ns string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		jobs, err := cl.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list jobs: %w", err)
		}
		complete, failed := 0, []string{}
		for i := range jobs.Items {
			switch JobFinished(&jobs.Items[i]) {
			case batchv1.JobComplete:
				complete++
			case batchv1.JobFailed:
				failed = append(failed, jobs.Items[i].Name)
			}
		}
		if len(failed) > 0 {
			return fmt.Errorf("jobs failed: %v", failed)
		}
		if complete == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d/%d jobs complete after %s", complete, n, timeout)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}
