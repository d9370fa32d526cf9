package sim

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

func TestScenarios(t *testing.T) {
	if len(Scenarios) < 20 {
		t.Fatalf("want at least 20 scenarios, have %d", len(Scenarios))
	}
	for _, sc := range Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			if sc.Purpose == "" {
				t.Error("scenario has no purpose line")
			}
			for seed := uint64(1); seed <= 3; seed++ {
				pods := 60
				if sc.Pods != 0 && sc.Pods < pods {
					pods = sc.Pods
				}
				s := New(sc, seed, Options{Pods: pods})
				r := s.Run()
				if r.Violation != nil {
					t.Fatalf("seed %d:\n%s", seed, r.Violation)
				}
				// The step bounds must stay far from what a sound run needs.
				total, perInstant := s.stepBounds()
				if r.Steps*10 > total || r.MaxInstantSteps*10 > perInstant {
					t.Errorf("seed %d: %d steps (%d at one instant) is within a tenth of the bounds %d (%d)", seed, r.Steps, r.MaxInstantSteps, total, perInstant)
				}
				t.Logf("seed %d: %d steps, at most %d at one instant", seed, r.Steps, r.MaxInstantSteps)
				if r.Unsettled != 0 {
					t.Errorf("seed %d: %d pods never settled", seed, r.Unsettled)
				}
			}
		})
	}
}

func TestSameSeedSameTrace(t *testing.T) {
	sc, err := Lookup("fault-events")
	if err != nil {
		t.Fatal(err)
	}
	a := New(sc, 7, Options{Pods: 150}).Run()
	b := New(sc, 7, Options{Pods: 150}).Run()
	if a.Hash != b.Hash || a.Steps != b.Steps {
		t.Fatalf("same seed, different runs: %s (%d steps) vs %s (%d steps)", a.Hash, a.Steps, b.Hash, b.Steps)
	}
	if c := New(sc, 8, Options{Pods: 150}).Run(); c.Hash == a.Hash {
		t.Fatalf("seeds 7 and 8 gave the same trace %s", a.Hash)
	}
}

// lyingReader plants a bug without touching the controller: it tells the
// controller that an OnFailure container which exited non-zero exited 0, so
// the decision believes a main that the kubelet will restart is done.
type lyingReader struct{ reconciler.Reader }

func (r lyingReader) Pod(namespace, name string) (*corev1.Pod, error) {
	pod, err := r.Reader.Pod(namespace, name)
	if err != nil || pod.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		return pod, err
	}
	pod = pod.DeepCopy()
	for i := range pod.Status.ContainerStatuses {
		if t := pod.Status.ContainerStatuses[i].State.Terminated; t != nil && t.ExitCode != 0 {
			t.ExitCode = 0
		}
	}
	return pod, nil
}

func TestPlantedBugIsCaught(t *testing.T) {
	sc, err := Lookup("job-onfailure-backofflimit")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Pods: 60, WrapReader: func(r reconciler.Reader) reconciler.Reader { return lyingReader{r} }}
	r := New(sc, 3, opts).Run()
	v := r.Violation
	if v == nil {
		t.Fatal("the planted bug (OnFailure non-zero exit treated as done) went unnoticed")
	}
	// Caught either as the main shows its non-zero exit or once it waits in
	// CrashLoopBackOff: both mean it will run again.
	if v.Kind != "safety" || !strings.Contains(v.Message, `stopped sidecar "proxy" while main "main"`) {
		t.Errorf("want a safety violation about a sidecar stopped before its main is done, got %s: %s", v.Kind, v.Message)
	}
	if !strings.Contains(v.String(), "--scenario job-onfailure-backofflimit --seed 3") || len(v.Trace) == 0 {
		t.Errorf("violation is not replayable:\n%s", v)
	}
	again := New(sc, 3, opts).Run().Violation
	if again == nil || again.Step != v.Step || again.Pod != v.Pod {
		t.Errorf("replay differs: first at step %d pod %s, replay %+v", v.Step, v.Pod, again)
	}
}

func TestSoakSeedsAreSafe(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		sc := SoakScenario(seed, 150)
		if r := New(sc, seed, Options{}).Run(); r.Violation != nil {
			t.Errorf("soak seed %d (%s):\n%s", seed, sc.Purpose, r.Violation)
		}
	}
}

func BenchmarkScenario100kPods(b *testing.B) {
	sc, err := Lookup("scale-short-jobs")
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		r := New(sc, uint64(i+1), Options{Pods: 100000}).Run()
		if r.Violation != nil {
			b.Fatal(r.Violation)
		}
		b.ReportMetric(float64(r.Pods), "pods/op")
		b.ReportMetric(r.Virtual.Seconds(), "virtual-s/op")
	}
}
