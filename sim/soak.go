package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// SoakScenario draws a scenario for a soak run from the seed: a mixed
// cluster, every kind of pod, and a random set of faults. Liveness is judged
// loosely (a path may be lost to a daemon that stays down), safety strictly.
func SoakScenario(seed uint64, pods int) Scenario {
	r := rand.New(rand.NewPCG(seed, 0x50a6))
	pick := func(p float64) bool { return r.Float64() < p }
	frac := func(max float64) float64 { return max * r.Float64() }
	f := Faults{CacheLag: time.Duration(r.Int64N(int64(3 * time.Second))), CacheJitter: 0.8}
	if pick(0.4) {
		f.WriteErrors, f.Conflicts = frac(0.2), frac(0.1)
	}
	if pick(0.3) {
		f.WriteTimeouts = frac(0.3)
	}
	if pick(0.4) {
		f.DropEvents, f.DupEvents, f.ReorderEvents = frac(0.05), frac(0.2), frac(0.2)
	}
	if pick(0.3) {
		f.CrashEvery = time.Duration(30+r.IntN(120)) * time.Second
	}
	if pick(0.3) {
		f.LeaderEvery = time.Duration(30+r.IntN(120)) * time.Second
	}
	f.CRRNeverCompleted = pick(0.1)
	daemon := DaemonSpec{Pickup: time.Duration(1+r.IntN(15)) * time.Second, FailRate: frac(0.2)}
	if pick(0.3) {
		daemon.DownFraction = frac(0.5)
		if pick(0.5) {
			daemon.DownFor = time.Duration(1+r.IntN(5)) * time.Minute
		}
	}
	var templates []Template
	for _, t := range mixedTemplates() {
		if t.Expect == ExpectTerminal {
			// A daemon that stays down or CRRs that never complete may leave
			// a pod with no path but a Warning: faults decide which.
			t.Expect = ExpectEither
		}
		templates = append(templates, t)
	}
	for _, sc := range []string{"job-never-ignore-exit-code", "init-and-native-sidecars", "pods-deleted-midway", "sidecar-never-starts", "job-onfailure-backofflimit"} {
		base, _ := Lookup(sc)
		for _, t := range base.Templates {
			if t.Expect == ExpectTerminal {
				t.Expect = ExpectEither
			}
			templates = append(templates, t)
		}
	}
	for _, t := range drawnRuleTemplates(pick, r.IntN) {
		if t.Expect == ExpectTerminal {
			t.Expect = ExpectEither
		}
		templates = append(templates, t)
	}
	templates = append(templates, orderedTemplates(r)...)
	// The cluster's refusals (drawn last, so the draws above stay what
	// they were for each seed): kruise's webhook answering 500, 403, 400 or
	// the CRD removed; CRRs deleted soon after they finish; quick-exit
	// images that do not pull; providers that ignore image updates; an
	// operator default quick-exit image.
	virtual := NodeGroup{Count: 10, Virtual: true}
	var defaultImage string
	if pick(0.3) {
		answers := []WebhookAnswer{WebhookDown, WebhookGateOff, WebhookLagging, CRDRemoved}
		f.CRRWebhook = answers[r.IntN(len(answers))]
		f.CRRWebhookFrom = time.Duration(r.IntN(60)) * time.Second
		if pick(0.5) {
			f.CRRWebhookFor = time.Duration(30+r.IntN(150)) * time.Second
		}
	}
	if pick(0.2) {
		f.CRRTTL = time.Duration(1+r.IntN(30)) * time.Second
	}
	if pick(0.15) {
		virtual.Missing = []string{QuickExitImage}
	}
	if pick(0.15) {
		virtual.IgnoresImageUpdates = true
	}
	if pick(0.3) {
		defaultImage = QuickExitImage
	}
	nodes := []NodeGroup{{Count: 30, Daemon: daemon}, virtual}
	if pick(0.2) {
		nodes = append(nodes, NodeGroup{Count: 5, NoDaemon: true})
	}
	if pick(0.3) {
		f.KubeletPhaseWriteBack = frac(1)
	}
	f.CRRLabelStripped = pick(0.05)
	// Nodes of every platform (decision/platform.go), drawn last.
	if pick(0.5) {
		nodes = append(nodes, platformNodes[1:5]...)
		templates = append(templates, platformTemplates()...)
	}
	// The native-sidecar webhook (admission.go), drawn last: opted-in pods,
	// converted or (the webhook down) admitted unchanged.
	if pick(0.3) {
		down := pick(0.5)
		for _, t := range nativeScenarios[0].Templates {
			if t.Expect == ExpectTerminal {
				t.Expect = ExpectEither
			}
			if down && t.NativeOptIn && pick(0.5) {
				t.WebhookDown = true
			}
			templates = append(templates, t)
		}
	}
	// The stop window's faults, drawn last: kruise-daemon taking CRRs up
	// late (up to a minute, past the stage bound and into the deadline), the
	// operator's CRR TTL shorter than the pods' grace periods, and pods whose
	// grace period is long. Leader moves (above) start the new leader with
	// an empty memory, at any step.
	var ttlSetting time.Duration
	if pick(0.3) {
		nodes[0].Daemon.Pickup = time.Duration(15+r.IntN(46)) * time.Second
		// kruise deleting CRRs seconds after they finish, whatever their
		// TTL, is a third party deleting our evidence: with pickups this
		// late it frees a first attempt's name inside its window, and a
		// restart or a new leader then stops the draining sidecar again.
		// That is outside the contract (decision/window.go), so the two
		// faults are not drawn together.
		f.CRRTTL = 0
	}
	if pick(0.3) {
		ttlSetting = time.Duration(1+r.IntN(20)) * time.Second
	}
	if pick(0.3) {
		for _, t := range longGraceTemplates() {
			t.Expect = ExpectEither
			templates = append(templates, t)
		}
		// A sidecar draining two minutes outlasts its CRR's finish by far
		// when kruise-daemon took it up late (a busy or restarted daemon):
		// a third party deleting CRRs seconds after they finish is, with a
		// restart or a leader move, outside the contract again (seed 349).
		f.CRRTTL = 0
	}
	if f.LeaderEvery > 0 || f.CrashEvery > 0 {
		// The same third party with a leader move or a restart alone: a
		// first attempt's CRR deleted seconds after it failed frees its name
		// inside its window, and a controller whose memory is empty finds no
		// evidence of it left (the happy path records nothing on the pod),
		// so it stops the sidecar again (seed 356). Outside the contract as
		// well (decision/window.go, docs/design.md).
		f.CRRTTL = 0
	}
	// Pods of Jobs with podFailurePolicies (jobverdict.go), drawn last.
	if pick(0.5) {
		templates = append(templates, jobPolicyTemplates(r)...)
	}
	// The kubelet's write-back (drawn above) lost by the controller's watch
	// until the relist, past the kubelet's grace, drawn last.
	if f.KubeletPhaseWriteBack > 0 && pick(0.3) {
		f.WriteBackUnseen = true
	}
	return Scenario{
		Name: "soak", Purpose: fmt.Sprintf("random faults %s%s", f, soakWindowFaults(nodes[0].Daemon.Pickup, ttlSetting)),
		Pods: pods, Nodes: nodes,
		Templates: templates, Faults: f, DefaultQuickExitImage: defaultImage, CRRTTLSetting: ttlSetting,
	}
}

// soakWindowFaults names the stop window's faults for the report.
func soakWindowFaults(pickup, ttl time.Duration) string {
	var out string
	if pickup > 15*time.Second {
		out += fmt.Sprintf(" daemon-pickup=%s", pickup)
	}
	if ttl > 0 {
		out += fmt.Sprintf(" crr-ttl-setting=%s", ttl)
	}
	return out
}

// longGraceTemplates are Job pods whose sidecars drain for two minutes, by
// CRR (one ignoring SIGTERM, so it drains the whole grace period), alone and
// in a stop order.
func longGraceTemplates() []Template {
	one := never("soak-long-grace", job(), sidecar("drain", "ignore", markCRR))
	one.Grace = 120
	ordered := never("soak-long-grace-order", job(), sidecar("s0", "ignore", markCRR), sidecar("s1", "exit:0", markCRR)).
		annotate(decision.AnnotationStopOrder, "s0,s1")
	ordered.Grace = 120
	return []Template{one, ordered}
}

// orderedTemplates draws stop orders for the soak: pods with two to four
// sidecars over CRRs and swaps, on normal and virtual nodes, some ignoring
// SIGTERM, each ordered by a random permutation of a random subset of them,
// and now and then an order that is bad input.
func orderedTemplates(r *rand.Rand) []Template {
	var out []Template
	for i := 0; i < 6; i++ {
		virtual := r.IntN(3) == 0
		n := 2 + r.IntN(3)
		cs := []C{job()}
		var names []string
		for j := 0; j < n; j++ {
			name := fmt.Sprintf("s%d", j)
			names = append(names, name)
			marks := []corev1.EnvVar{markImage}
			if !virtual {
				switch r.IntN(3) {
				case 0:
					marks = []corev1.EnvVar{markCRR}
				case 1:
					marks = []corev1.EnvVar{markCRR, markImage}
				}
			}
			on := "exit:0"
			if r.IntN(5) == 0 {
				on = "ignore"
			}
			cs = append(cs, sidecar(name, on, marks...))
		}
		r.Shuffle(len(names), func(a, b int) { names[a], names[b] = names[b], names[a] })
		order := names[:1+r.IntN(len(names))]
		switch r.IntN(8) {
		case 0:
			order = append(order, "main")
		case 1:
			order = append(order, order[0])
		case 2:
			order = append(order, "nope")
		}
		t := never(fmt.Sprintf("soak-order-%d", i), cs...).annotate(decision.AnnotationStopOrder, strings.Join(order, ","))
		t.Virtual, t.Expect = virtual, ExpectEither
		out = append(out, t)
	}
	return out
}
