package sim

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/kube"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// trimProbe sits between a simulated controller and its cache. Every pod the
// controller reads is also decided twice, as the cache holds it and as a
// read of the production informer's cache returns it (kube.AsCached: its
// transform, kube.TrimPod, then encoded and decoded), with the same
// node, CRRs, clock and policy: the two plans must be equal. The probe's own
// reconciler reads the cache directly, so it never sees itself.
type trimProbe struct {
	reconciler.Reader
	t     *testing.T
	s     *Sim
	plan  *reconciler.Reconciler
	uids  map[string]bool
	reads int
	fails int
}

func (p *trimProbe) Pod(namespace, name string) (*corev1.Pod, error) {
	pod, err := p.Reader.Pod(namespace, name)
	if err != nil {
		return pod, err
	}
	p.reads++
	p.uids[string(pod.UID)] = true
	cached, err := kube.AsCached(pod.DeepCopy())
	if err != nil {
		p.t.Fatalf("trim pod %s: %v", name, err)
	}
	// The full pod as every client receives it: the API's encodings, JSON
	// and protobuf alike, keep whole seconds of a time (metav1.Time), and
	// the simulator's times have nanoseconds.
	data, err := pod.Marshal()
	if err != nil {
		p.t.Fatalf("encode pod %s: %v", name, err)
	}
	received := &corev1.Pod{}
	if err := received.Unmarshal(data); err != nil {
		p.t.Fatalf("decode pod %s: %v", name, err)
	}
	now := p.s.now()
	full, errFull := p.plan.Plan(received, now)
	trimmed, errTrimmed := p.plan.Plan(cached, now)
	if (errFull == nil) != (errTrimmed == nil) {
		p.t.Errorf("pod %s at %s: plan error %v on the full pod, %v on the trimmed one", name, now, errFull, errTrimmed)
	}
	if diff := cmp.Diff(full, trimmed); diff != "" && p.fails < 5 {
		p.fails++
		p.t.Errorf("scenario %s seed %d, pod %s at %s: the trim changes the plan (-full +trimmed):\n%s\nreplay: go run ./sim/cmd/sim --scenario %s --seed %d --pods %d --trace-pod %s",
			p.s.sc.Name, p.s.seed, name, fmtDur(now.Sub(Epoch)), diff, p.s.sc.Name, p.s.seed, p.s.sc.Pods, name)
	}
	return pod, nil
}

// TestTrimNeverChangesADecision: for every pod state the simulator produces
// (every scenario, several seeds, random fault mixes), Decide gives the same
// plan on the trimmed pod as on the full one. A field the decision reads that
// the trim drops fails it, however the field came to be read.
func TestTrimNeverChangesADecision(t *testing.T) {
	type run struct {
		sc   Scenario
		seed uint64
		pods int
	}
	var runs []run
	for _, sc := range Scenarios {
		for seed := uint64(1); seed <= 2; seed++ {
			runs = append(runs, run{sc, seed, 20})
		}
	}
	// Soak scenarios draw a fault mix from the seed and mix every kind of pod.
	for seed := uint64(1); seed <= 6; seed++ {
		runs = append(runs, run{SoakScenario(seed, 40), seed, 0})
	}
	pods, reads := 0, 0
	for _, r := range runs {
		s := New(r.sc, r.seed, Options{Pods: r.pods})
		probe := &trimProbe{t: t, s: s, uids: map[string]bool{}}
		s.opts.WrapReader = func(inner reconciler.Reader) reconciler.Reader {
			cfg := reconciler.DefaultConfig()
			cfg.Policy.AllowedQuickExitImages = s.sc.AllowedImages
			probe.Reader = inner
			probe.plan = reconciler.New(cfg, inner, nil, reconciler.NoLiveReads{}, nil, nil, s.clock)
			return probe
		}
		if res := s.Run(); res.Violation != nil {
			t.Errorf("scenario %s seed %d:\n%s", r.sc.Name, r.seed, res.Violation)
		}
		reads += probe.reads
		pods += len(probe.uids)
	}
	if pods < 500 || reads < 5000 {
		t.Fatalf("compared only %d pods in %d states: the simulator produced less than it should", pods, reads)
	}
	t.Logf("%d runs: %d pods, %d pod states read by the controller, %d plan pairs compared", len(runs), pods, reads, reads)
}
