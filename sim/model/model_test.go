package model

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/images/workload/spec"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	workload  = "workload:dev"
	quickExit = "quick-exit:dev"
	missing   = "missing:1"
)

func cfg() Config {
	return Config{Timings: DefaultTimings(), Images: Images{
		Pullable:  map[string]bool{workload: true, quickExit: true},
		QuickExit: map[string]bool{quickExit: true}}}
}

func ctr(name string, args ...string) corev1.Container {
	return corev1.Container{Name: name, Image: workload, Command: []string{"/workload"}, Args: args}
}

func newPod(t *testing.T, policy corev1.RestartPolicy, containers ...corev1.Container) *Pod {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Spec: corev1.PodSpec{RestartPolicy: policy, Containers: containers}}
	p, err := NewPod(pod, cfg())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runUntil advances the pod in steps, as a node would, until d has passed.
func runUntil(p *Pod, d time.Duration) {
	for now := t0; !now.After(t0.Add(d)); now = now.Add(100 * time.Millisecond) {
		p.Advance(now)
	}
}

func TestPhases(t *testing.T) {
	cases := map[string]struct {
		policy     corev1.RestartPolicy
		containers []corev1.Container
		after      time.Duration
		want       corev1.PodPhase
	}{
		"never, main exits 0, sidecar runs": {corev1.RestartPolicyNever,
			[]corev1.Container{ctr("main", "main", "--seconds", "5"), ctr("side", "sidecar")}, time.Minute, corev1.PodRunning},
		"never, main alone exits 0": {corev1.RestartPolicyNever,
			[]corev1.Container{ctr("main", "main", "--seconds", "5")}, time.Minute, corev1.PodSucceeded},
		"never, main alone exits 2": {corev1.RestartPolicyNever,
			[]corev1.Container{ctr("main", "main", "--seconds", "5", "--exit-code", "2")}, time.Minute, corev1.PodFailed},
		"onfailure, main keeps failing": {corev1.RestartPolicyOnFailure,
			[]corev1.Container{ctr("main", "main", "--seconds", "5", "--exit-code", "1")}, time.Minute, corev1.PodRunning},
		"never, sidecar never starts: pending after the main ran": {corev1.RestartPolicyNever,
			[]corev1.Container{ctr("main", "main", "--seconds", "5"), {Name: "side", Image: missing}}, time.Minute, corev1.PodPending},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := newPod(t, tc.policy, tc.containers...)
			runUntil(p, tc.after)
			if p.Status().Phase != tc.want {
				t.Errorf("phase %s, want %s", p.Status().Phase, tc.want)
			}
		})
	}
}

func TestOnFailureRestartsUntilSuccess(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p",
		Annotations: map[string]string{AnnotationExitCodesPrefix + "main": "1,1,0"}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyOnFailure, Containers: []corev1.Container{ctr("main", "main", "--seconds", "2")}}}
	p, err := NewPod(pod, cfg())
	if err != nil {
		t.Fatal(err)
	}
	runUntil(p, 2*time.Minute)
	c := p.Container("main")
	if p.Phase != corev1.PodSucceeded || c.RestartCount != 2 || c.ExitCode != 0 {
		t.Errorf("phase %s, restarts %d, exit %d; want Succeeded after 2 restarts, exit 0", p.Phase, c.RestartCount, c.ExitCode)
	}
}

func TestImageChange(t *testing.T) {
	cases := map[string]struct {
		policy     corev1.RestartPolicy
		mainExit   string
		onSIGTERM  string
		image      string
		wantPhase  corev1.PodPhase
		wantImage  bool // the quick-exit instance ran
		wantKilled int32
		wantExit   int32 // the sidecar's exit in the final status
	}{
		// The kubelet kills the old instance and starts the new one in one
		// pod sync, under any restart policy, and reports no status in
		// between (lifecycle.go, apply): the quick-exit image's 0 is the
		// sidecar's exit, and the phase is the mains'.
		"never, handles SIGTERM":              {corev1.RestartPolicyNever, "0", "exit:0", quickExit, corev1.PodSucceeded, true, 0, 0},
		"never, ignores SIGTERM":              {corev1.RestartPolicyNever, "0", "ignore", quickExit, corev1.PodSucceeded, true, exitSIGKILL, 0},
		"never, main failed, ignores SIGTERM": {corev1.RestartPolicyNever, "1", "ignore", quickExit, corev1.PodFailed, true, exitSIGKILL, 0},
		"onfailure, ignores SIGTERM":          {corev1.RestartPolicyOnFailure, "0", "ignore", quickExit, corev1.PodSucceeded, true, exitSIGKILL, 0},
		// A new image that cannot be pulled: the next sync shows the killed
		// instance's exit, and Never does not run it again.
		"never, image not pullable, ignores SIGTERM": {corev1.RestartPolicyNever, "0", "ignore", missing, corev1.PodFailed, false, exitSIGKILL, exitSIGKILL},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := newPod(t, tc.policy, ctr("main", "main", "--seconds", "5", "--exit-code", tc.mainExit), ctr("side", "sidecar", "--on-sigterm", tc.onSIGTERM))
			runUntil(p, 10*time.Second)
			stopped, err := p.SetImage("side", tc.image, t0.Add(10*time.Second))
			if err != nil || !stopped {
				t.Fatalf("SetImage: stopped=%v err=%v; want the running sidecar stopped", stopped, err)
			}
			runUntil(p, 2*time.Minute)
			c := p.Container("side")
			ranQuickExit := c.RestartCount == 1
			killed := c.ExitCode
			if c.Last != nil {
				killed = c.Last.ExitCode
			}
			if p.Phase != tc.wantPhase || ranQuickExit != tc.wantImage || killed != tc.wantKilled {
				t.Errorf("phase %s, quick-exit ran %v, killed instance exit %d; want %s, %v, %d", p.Phase, ranQuickExit, killed, tc.wantPhase, tc.wantImage, tc.wantKilled)
			}
			if st := p.Status().ContainerStatuses[1].State.Terminated; st == nil || st.ExitCode != tc.wantExit {
				t.Errorf("sidecar's final state %+v, want terminated with %d", p.Status().ContainerStatuses[1].State, tc.wantExit)
			}
		})
	}
}

// No status between the kill and the start shows the killed instance's
// exit: the Job's podFailurePolicy reads only the quick-exit image's 0.
func TestImageChangeNeverShowsTheKilledExit(t *testing.T) {
	p := newPod(t, corev1.RestartPolicyNever, ctr("main", "main", "--seconds", "5", "--exit-code", "1"), ctr("side", "sidecar", "--on-sigterm", "ignore"))
	runUntil(p, 10*time.Second)
	if _, err := p.SetImage("side", quickExit, t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	for now := t0.Add(10 * time.Second); !now.After(t0.Add(2 * time.Minute)); now = now.Add(50 * time.Millisecond) {
		p.Advance(now)
		st := p.Status()
		side := st.ContainerStatuses[1].State
		if side.Terminated != nil && side.Terminated.ExitCode != 0 {
			t.Fatalf("%s: the sidecar shows exit %d, the killed instance's", now.Sub(t0), side.Terminated.ExitCode)
		}
		if st.Phase == corev1.PodFailed && side.Terminated == nil {
			t.Fatalf("%s: the pod turned Failed with the sidecar %+v", now.Sub(t0), side)
		}
	}
}

func TestStopFollowsRestartPolicy(t *testing.T) {
	for policy, wantRestarts := range map[corev1.RestartPolicy]int32{corev1.RestartPolicyNever: 0, corev1.RestartPolicyOnFailure: 1} {
		p := newPod(t, policy, ctr("main", "main", "--seconds", "5"), ctr("side", "sidecar", "--on-sigterm", "exit:1"))
		runUntil(p, 10*time.Second)
		if ok, err := p.Stop("side", t0.Add(10*time.Second)); !ok || err != nil {
			t.Fatalf("%s: Stop = %v, %v", policy, ok, err)
		}
		runUntil(p, time.Minute)
		if c := p.Container("side"); c.RestartCount != wantRestarts {
			t.Errorf("%s: sidecar exiting 1 on SIGTERM restarted %d times, want %d", policy, c.RestartCount, wantRestarts)
		}
	}
}

func TestNativeSidecarStoppedWhenMainsDone(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	native := ctr("mesh", "sidecar")
	native.RestartPolicy = &always
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			InitContainers: []corev1.Container{ctr("setup", "main", "--seconds", "1"), native},
			Containers:     []corev1.Container{ctr("main", "main", "--seconds", "20")}}}
	p, err := NewPod(pod, cfg())
	if err != nil {
		t.Fatal(err)
	}
	runUntil(p, 12*time.Second)
	if p.Phase != corev1.PodRunning || p.Container("mesh").State != Running {
		t.Fatalf("phase %s mesh %s, want Running with the native sidecar up", p.Phase, p.Container("mesh").State)
	}
	runUntil(p, time.Minute)
	if p.Phase != corev1.PodSucceeded || p.Container("mesh").State != Terminated {
		t.Errorf("phase %s mesh %s, want Succeeded with the native sidecar stopped by the kubelet", p.Phase, p.Container("mesh").State)
	}
}

func TestInitFailureFailsNeverPod(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			InitContainers: []corev1.Container{ctr("setup", "main", "--seconds", "1", "--exit-code", "3")},
			Containers:     []corev1.Container{ctr("main", "main", "--seconds", "5")}}}
	p, err := NewPod(pod, cfg())
	if err != nil {
		t.Fatal(err)
	}
	runUntil(p, time.Minute)
	if p.Phase != corev1.PodFailed || p.Container("main").ID != "" {
		t.Errorf("phase %s, main started=%v; want Failed with the main never started", p.Phase, p.Container("main").ID != "")
	}
}

func TestTerminalPhaseIsFinal(t *testing.T) {
	p := newPod(t, corev1.RestartPolicyNever, ctr("main", "main", "--seconds", "1"))
	runUntil(p, 10*time.Second)
	v := p.Version()
	if _, err := p.SetImage("main", quickExit, t0.Add(11*time.Second)); err != nil {
		t.Fatal(err)
	}
	runUntil(p, time.Minute)
	if p.Phase != corev1.PodSucceeded || p.Container("main").RestartCount != 0 {
		t.Errorf("phase %s restarts %d after a spec change on a finished pod (version %d→%d)", p.Phase, p.Container("main").RestartCount, v, p.Version())
	}
}

func TestParseBehaviour(t *testing.T) {
	pod := &corev1.Pod{}
	b, err := ParseBehaviour(pod, ctr("s", "sidecar", "--on-sigterm", "ignore"))
	if err != nil || !b.IgnoreSIGTERM || len(b.Runs) != 0 {
		t.Errorf("sidecar ignore: %+v, %v", b, err)
	}
	b, err = ParseBehaviour(pod, ctr("m", "main", "--seconds", "1.5", "--exit-code", "4"))
	if err != nil || len(b.Runs) != 1 || b.Runs[0] != (Run{Duration: 1500 * time.Millisecond, ExitCode: 4}) {
		t.Errorf("main: %+v, %v", b, err)
	}
	if _, err := ParseBehaviour(pod, ctr("x", "bogus")); err == nil {
		t.Error("an unknown mode parsed")
	}
	if b, err := ParseBehaviour(pod, corev1.Container{Name: "proxy"}); err != nil || len(b.Runs) != 0 || b.IgnoreSIGTERM {
		t.Errorf("no argv: %+v, %v; want a process that runs until SIGTERM and exits 0", b, err)
	}
}

func TestFinishStopsEverything(t *testing.T) {
	p := newPod(t, corev1.RestartPolicyOnFailure, ctr("main", "main", "--seconds", "5"), ctr("side", "sidecar", "--on-sigterm", "exit:1"))
	runUntil(p, 10*time.Second)
	p.Finish(t0.Add(10 * time.Second))
	runUntil(p, time.Minute)
	if c := p.Container("side"); c.State != Terminated || c.RestartCount != 0 || p.Gone() {
		t.Errorf("side %s restarts %d gone %v; want stopped once, not restarted, the pod still there", c.State, c.RestartCount, p.Gone())
	}
}

// The container's own restart rules (KEP-5307), as the kubelet plays them:
// the table, in the model.
func TestContainerRestartRules(t *testing.T) {
	never, onFailure, always := corev1.ContainerRestartPolicyNever, corev1.ContainerRestartPolicyOnFailure, corev1.ContainerRestartPolicyAlways
	on42 := []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	cases := map[string]struct {
		pod          corev1.RestartPolicy
		policy       *corev1.ContainerRestartPolicy
		rules        []corev1.ContainerRestartRule
		codes        string
		wantPhase    corev1.PodPhase
		wantRestarts int32
	}{
		"pod Never, main OnFailure fails once":       {corev1.RestartPolicyNever, &onFailure, nil, "1,0", corev1.PodSucceeded, 1},
		"pod Never, main rule Restart on 42":         {corev1.RestartPolicyNever, &never, on42, "42,42,0", corev1.PodSucceeded, 2},
		"pod Never, main rule Restart on 42, exit 3": {corev1.RestartPolicyNever, &never, on42, "42,3", corev1.PodFailed, 1},
		"pod OnFailure, main Never exits 1":          {corev1.RestartPolicyOnFailure, &never, nil, "1,0", corev1.PodFailed, 0},
		"pod OnFailure, main Always exits 0":         {corev1.RestartPolicyOnFailure, &always, nil, "0", corev1.PodRunning, 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			main := ctr("main", "main", "--seconds", "2")
			main.RestartPolicy, main.RestartPolicyRules = tc.policy, tc.rules
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p",
				Annotations: map[string]string{AnnotationExitCodesPrefix + "main": tc.codes}},
				Spec: corev1.PodSpec{RestartPolicy: tc.pod, Containers: []corev1.Container{main}}}
			p, err := NewPod(pod, cfg())
			if err != nil {
				t.Fatal(err)
			}
			runUntil(p, time.Minute)
			if c := p.Container("main"); p.Phase != tc.wantPhase || c.RestartCount != tc.wantRestarts {
				t.Errorf("phase %s, restarts %d; want %s after %d restarts", p.Phase, c.RestartCount, tc.wantPhase, tc.wantRestarts)
			}
			if p.Terminal() == p.RunsAgain("main") {
				t.Errorf("terminal %v but RunsAgain %v", p.Terminal(), p.RunsAgain("main"))
			}
		})
	}
}

// A shipper delivers its last line on SIGTERM only while the proxy still
// listens: stopped first, exit 0; stopped together with the proxy (a kill or
// a swap of both at once), its line is lost (spec.ExitLost).
func TestShipperDeliversOnlyThroughARunningProxy(t *testing.T) {
	const port = "9000"
	killedExit := func(c *Container) int32 {
		if c.Last != nil {
			return c.Last.ExitCode
		}
		return c.ExitCode
	}
	for name, tc := range map[string]struct {
		stop func(p *Pod, at time.Time) error
		want int32
	}{
		"shipper stopped first": {func(p *Pod, at time.Time) error {
			_, err := p.Stop("shipper", at)
			return err
		}, 0},
		"both stopped at once": {func(p *Pod, at time.Time) error {
			if _, err := p.Stop("proxy", at); err != nil {
				return err
			}
			_, err := p.Stop("shipper", at)
			return err
		}, spec.ExitLost},
		"shipper swapped first": {func(p *Pod, at time.Time) error {
			_, err := p.SetImage("shipper", quickExit, at)
			return err
		}, 0},
		"both swapped at once": {func(p *Pod, at time.Time) error {
			if _, err := p.SetImage("proxy", quickExit, at); err != nil {
				return err
			}
			_, err := p.SetImage("shipper", quickExit, at)
			return err
		}, spec.ExitLost},
	} {
		t.Run(name, func(t *testing.T) {
			p := newPod(t, corev1.RestartPolicyNever, ctr("main", "main", "--seconds", "5"),
				ctr("proxy", "sidecar", "--listen", port), ctr("shipper", "sidecar", "--on-sigterm", "deliver:"+port))
			runUntil(p, 10*time.Second)
			if err := tc.stop(p, t0.Add(10*time.Second)); err != nil {
				t.Fatal(err)
			}
			runUntil(p, time.Minute)
			if got := killedExit(p.Container("shipper")); got != tc.want {
				t.Errorf("shipper's stopped instance exited %d, want %d", got, tc.want)
			}
		})
	}
}
