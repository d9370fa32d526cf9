package sim

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// policyBlindReader plants the bug of a decision that knows only the pod's
// restartPolicy: it hides every container's own restartPolicy and
// restartPolicyRules from the controller, which then takes a main that its
// rules restart for a finished one. The kubelet model still plays the rules.
type policyBlindReader struct{ reconciler.Reader }

func (r policyBlindReader) Pod(namespace, name string) (*corev1.Pod, error) {
	pod, err := r.Reader.Pod(namespace, name)
	if err != nil || pod == nil {
		return pod, err
	}
	pod = pod.DeepCopy()
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].RestartPolicy, pod.Spec.Containers[i].RestartPolicyRules = nil, nil
	}
	return pod, nil
}

func blind(r reconciler.Reader) reconciler.Reader { return policyBlindReader{r} }

// The invariant is computed from the restart rules: a decision blind to them
// fails the soak, with a trace that replays the same.
func TestPolicyBlindDecisionFailsTheSoak(t *testing.T) {
	const pods = 150
	for seed := uint64(1); seed <= 4; seed++ {
		sc := SoakScenario(seed, pods)
		v := New(sc, seed, Options{WrapReader: blind}).Run().Violation
		if v == nil {
			continue
		}
		// The main its rules restart shows either as terminated (restarted
		// alone) or as waiting (the whole pod restarting in place).
		if v.Kind != "safety" || !strings.Contains(v.Message, "while main ") {
			t.Fatalf("seed %d: want a safety violation about a stop while a main its rules restart is not done, got %s: %s", seed, v.Kind, v.Message)
		}
		if !strings.Contains(v.String(), "--scenario soak --seed") || len(v.Trace) == 0 {
			t.Errorf("violation is not replayable:\n%s", v)
		}
		again := New(SoakScenario(seed, pods), seed, Options{WrapReader: blind}).Run().Violation
		if again == nil || again.Step != v.Step || again.Pod != v.Pod {
			t.Errorf("replay differs: first at step %d pod %s, replay %+v", v.Step, v.Pod, again)
		}
		if clean := New(SoakScenario(seed, pods), seed, Options{}).Run().Violation; clean != nil {
			t.Errorf("seed %d fails without the planted bug too:\n%s", seed, clean)
		}
		t.Logf("seed %d caught the policy-blind decision:\n%s", seed, v)
		return
	}
	t.Fatal("a decision blind to container restart rules passed soak seeds 1-4")
}

// Each scenario of the table where the kubelet restarts the main
// catches the blind decision on its own.
func TestPolicyBlindDecisionFailsTheRuleScenarios(t *testing.T) {
	for _, name := range []string{"rules-never-main-onfailure", "rules-never-restart-on-42", "rules-onfailure-main-always", "rules-ignore-exit-code"} {
		sc, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		v := New(sc, 1, Options{Pods: 40, WrapReader: blind}).Run().Violation
		if v == nil || v.Kind != "safety" {
			t.Errorf("%s: the policy-blind decision went unnoticed (%v)", name, v)
			continue
		}
		t.Logf("%s: %s", name, v.Message)
	}
}
