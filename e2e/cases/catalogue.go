package cases

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

const (
	never     = corev1.RestartPolicyNever
	onFailure = corev1.RestartPolicyOnFailure
)

// JobFeatures are the single-Job cases, for any environment whose node runs
// kruise-daemon. Each has its own namespace.
func JobFeatures() []features.Feature {
	fs := []*features.FeatureBuilder{
		JobFeature("Never, main exits 0: sidecar stopped by CRR, Job Complete",
			JobSpec{Name: "never-ok", RestartPolicy: never, Containers: []Container{Main("main", 2, 0), Sidecar("proxy", "exit:0", true)}},
			Expect{Job: batchv1.JobComplete, Phase: corev1.PodSucceeded, ExitCodes: map[string]int32{"main": 0, "proxy": 0}, CRRContainers: []string{"proxy"}, Event: true}),
		JobFeature("Never, main exits 3: sidecar still stopped, Job Failed",
			JobSpec{Name: "never-fail", RestartPolicy: never, Containers: []Container{Main("main", 2, 3), Sidecar("proxy", "exit:0", true)}},
			Expect{Job: batchv1.JobFailed, Phase: corev1.PodFailed, ExitCodes: map[string]int32{"main": 3, "proxy": 0}, CRRContainers: []string{"proxy"}, Event: true}),
		JobFeature("OnFailure, main exits 0: sidecar stopped by CRR, Job Complete",
			JobSpec{Name: "onfailure-ok", RestartPolicy: onFailure, Containers: []Container{Main("main", 2, 0), Sidecar("proxy", "exit:0", true)}},
			Expect{Job: batchv1.JobComplete, Phase: corev1.PodSucceeded, ExitCodes: map[string]int32{"main": 0, "proxy": 0}, CRRContainers: []string{"proxy"}, Event: true}),
		// A non-zero main under OnFailure is restarted by the kubelet, so it
		// is never done: the sidecar must not be touched. backoffLimit 0
		// makes the Job controller fail the Job on the first restart.
		JobFeature("OnFailure, main exits 1: never done, sidecar untouched, Job Failed",
			JobSpec{Name: "onfailure-fail", RestartPolicy: onFailure, Containers: []Container{Main("main", 2, 1), Sidecar("proxy", "exit:0", true)}},
			Expect{Job: batchv1.JobFailed, CRRContainers: nil, Event: false}),
		JobFeature("Two marked sidecars: one CRR names both",
			JobSpec{Name: "two-sidecars", RestartPolicy: never, Containers: []Container{Main("main", 2, 0), Sidecar("proxy", "exit:0", true), Sidecar("logs", "exit:0", true)}},
			Expect{Job: batchv1.JobComplete, Phase: corev1.PodSucceeded, ExitCodes: map[string]int32{"main": 0, "proxy": 0, "logs": 0}, CRRContainers: []string{"logs", "proxy"}, Event: true}),
		// Without ignore-exit-code the sidecar's own exit code counts: the
		// pod fails although the main succeeded (OpenKruise behaves alike).
		JobFeature("Sidecar exits 1 on SIGTERM: pod Failed",
			JobSpec{Name: "sidecar-exit1", RestartPolicy: never, Containers: []Container{Main("main", 2, 0), Sidecar("proxy", "exit:1", true)}},
			Expect{Job: batchv1.JobFailed, Phase: corev1.PodFailed, ExitCodes: map[string]int32{"main": 0, "proxy": 1}, CRRContainers: []string{"proxy"}, Event: true}),
		// The controller settles the phase; the kubelet, seeing a finished
		// pod, stops the sidecar itself (exit 1) and keeps the phase: no CRR.
		JobFeature("Ignore exit code: phase settled Succeeded, the kubelet stops the sidecar",
			JobSpec{Name: "ignore-exit", RestartPolicy: never, Containers: []Container{Main("main", 2, 0), Sidecar("proxy", "exit:1", true).With(EnvIgnoreExitCode, "true")}},
			Expect{Job: batchv1.JobComplete, Phase: corev1.PodSucceeded, ExitCodes: map[string]int32{"main": 0, "proxy": 1}, CRRContainers: nil, Event: true, PodCondition: "SidecarTerminated"}),
		// The kubelet stops native sidecars itself; the controller must not
		// classify init containers at all.
		JobFeature("Native sidecar: stopped by the kubelet, no CRR",
			JobSpec{Name: "native-sidecar", RestartPolicy: never, Containers: []Container{Main("main", 2, 0)}, NativeSidecars: []Container{Sidecar("native", "exit:0", false)}},
			Expect{Job: batchv1.JobComplete, Phase: corev1.PodSucceeded, ExitCodes: map[string]int32{"main": 0}, InitExitCodes: map[string]int32{"native": 0}, CRRContainers: nil, Event: false}),
		UnmarkedSidecarFeature(),
		StopOrderFeature(),
		NoStopOrderFeature(),
		NearMissMarkFeature(),
	}
	out := make([]features.Feature, len(fs))
	for i, f := range fs {
		out[i] = f.Feature()
	}
	return out
}

// UnmarkedSidecarFeature: a sidecar without any mark is a main container
// to the controller, so nothing is done and the pod keeps running.
func UnmarkedSidecarFeature() *features.FeatureBuilder {
	return untouchedFeature("Unmarked sidecar: untouched, pod stays Running", "unmarked", Sidecar("proxy", "exit:0", false), "")
}

// NearMissMarkFeature: a sidecar whose env name is one letter off
// OpenKruise's mark is not marked either (nothing is stopped), but the pod
// gets a NearMissMark Warning naming the mark meant.
func NearMissMarkFeature() *features.FeatureBuilder {
	typo := Sidecar("proxy", "exit:0", false).With("KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXT", "true")
	return untouchedFeature("Near-miss mark: untouched, a Warning names the mark meant", "near-miss", typo, "NearMissMark")
}

// untouchedFeature: the pod's sidecar counts as a main container, so after
// the main exits nothing is written and the pod keeps running; warning, if
// set, is the reason of a Warning the pod must get.
func untouchedFeature(title, name string, sidecar Container, warning string) *features.FeatureBuilder {
	js := JobSpec{Name: name, RestartPolicy: never, Containers: []Container{Main("main", 1, 0), sidecar}}
	return features.New(title).
		WithLabel("type", "job").
		Setup(createNamespaceAndJob(&js)).
		Assess("nothing happens after the main exits", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			cl := mustClients(t, cfg)
			var obs Observation
			obs.CRRs = map[string][]string{}
			// Wait for the main to exit, then give the controller the time
			// it needs everywhere else (a few seconds) to do something wrong.
			var mainDone time.Time
			deadline := time.Now().Add(2 * time.Minute)
			for time.Now().Before(deadline) {
				if err := obs.observePod(ctx, cl, js.Namespace, js.Name); err != nil {
					t.Fatal(err)
				}
				if obs.Pod != nil && mainDone.IsZero() {
					if _, ok := ExitCode(obs.Pod, "main"); ok {
						mainDone = time.Now()
					}
				}
				if !mainDone.IsZero() && time.Since(mainDone) > 8*time.Second {
					break
				}
				_ = sleep(ctx, 250*time.Millisecond)
			}
			if mainDone.IsZero() {
				t.Fatalf("main never exited: %+v", obs.Pod)
			}
			if s, _ := ContainerState(obs.Pod, "proxy"); s.State.Running == nil {
				t.Errorf("unmarked sidecar not running 8 s after the main exited: %+v", s.State)
			}
			if obs.Pod.Status.Phase != corev1.PodRunning {
				t.Errorf("pod phase %s, want Running", obs.Pod.Status.Phase)
			}
			if len(obs.CRRs) > 0 {
				t.Errorf("CRRs %v for a pod without marked sidecars", obs.CRRs)
			}
			if evs, _ := PodEvents(ctx, cl.Kube, js.Namespace, obs.Pod.Name, ReasonSidecarTerminating); len(evs) > 0 {
				t.Errorf("unexpected event %s", evs[0].Message)
			}
			if warning != "" {
				if err := WaitForPodEvent(ctx, cl.Kube, obs.Pod, corev1.EventTypeWarning, warning, eventWait); err != nil {
					t.Error(err)
				}
			}
			j, err := cl.Kube.BatchV1().Jobs(js.Namespace).Get(ctx, js.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if f := JobFinished(j); f != "" {
				t.Errorf("job %s, want still running", f)
			}
			return ctx
		}).
		Teardown(deleteNamespace(&js))
}
