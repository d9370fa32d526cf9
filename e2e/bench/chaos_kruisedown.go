package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/kruisetest"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// kruiseOutage is how long kruise-manager stays stopped in the scenario
// (its restart until ready comes on top): long enough for three refusals of
// a pod's CRR under the default 5 s backoff (refused at 0, 5 and 15 s, sent
// again at 35 s, after it is back).
const kruiseOutage = 20 * time.Second

// kruiseChaosUser is kruise-manager's identity in the chaos run's audit log.
const kruiseChaosUser = "chaos:kruise-manager"

// kruiseDown is the state of the kruise-manager-down scenario.
type kruiseDown struct {
	mu   sync.Mutex
	from time.Time // kruise-manager stopped: its webhook stops answering
	to   time.Time // started again and ready
}

// The scenario runs OpenKruise's real kruise-manager (v1.9.1, its own
// SidecarTerminator off, as with the controller), whose CRR webhook is the
// mutating "mcontainerrecreaterequest.kb.io" with failurePolicy Fail
// (config/webhook/manifests.yaml). Stopped, it leaves its webhook
// configurations behind, so the API server answers every CRR create with
// its 500 "failed calling webhook" (kruisetest.WebhookDown models that
// answer for the unit tests; here the API server gives it). The bench still
// plays kruise-daemon. The pods' namespace carries the label control-plane,
// which kruise's pod webhooks (mpod.kb.io, vpod.kb.io, failurePolicy Fail
// too) skip (config/webhook/patch_manifests.yaml): elsewhere the image swap
// would be refused with the same 500 while kruise-manager is down, and every
// pod would wait for it like the CRR-only ones.
var kruiseManagerDown = chaosScenario{name: "kruise-manager-down",
	purpose: fmt.Sprintf("kruise-manager (its CRR webhook has failurePolicy Fail) is stopped a tenth into the burst and started again %s later: every refused CRR is a "+
		"SidecarKillFailed Warning naming the 500; a sidecar with a quick-exit image is swapped meanwhile, the others get their CRR once it is back; "+
		"the writes per pod during the outage stay within the backoff's bound", kruiseOutage),
	// A refused create is no CRR: each pod still gets at most one.
	maxCRRs: 1,
	setup: func(ctx context.Context, w *chaosWorld) error {
		files, err := cluster.KruiseCRDFiles(ctx) // kruise-manager wants all of them
		if err != nil {
			return err
		}
		if err := w.cp.InstallCRDs(ctx, files); err != nil {
			return err
		}
		kube, _, err := clients(w.cp.RestConfig)
		if err != nil {
			return err
		}
		label := []byte(`{"metadata":{"labels":{"control-plane":"chaos"}}}`)
		if _, err := kube.CoreV1().Namespaces().Patch(ctx, Namespace, types.MergePatchType, label, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("label namespace %s: %w", Namespace, err)
		}
		if _, err := cluster.StartKruiseManager(ctx, w.cp, cluster.KruiseManagerOptions{User: kruiseChaosUser}); err != nil {
			return err
		}
		w.kruiseDown = &kruiseDown{}
		return nil
	},
	opts: func(w *chaosWorld) burstOptions {
		return burstOptions{pod: normalNodePod, during: func(ctx context.Context, b *burst) {
			// Early, so that most of the burst meets the outage: the
			// controller acts on a pod within a second of its main's exit.
			waitActed(ctx, b, len(b.pods)/10)
			kd := w.kruiseDown
			restart, err := w.cp.StopKruiseManager(5 * time.Second)
			if err != nil {
				w.cfg.Logf("stop kruise-manager: %v", err)
				return
			}
			kd.mu.Lock()
			kd.from = time.Now()
			kd.mu.Unlock()
			w.cfg.Logf("kruise-manager stopped %.1fs into the burst", time.Since(b.start).Seconds())
			select {
			case <-time.After(kruiseOutage):
			case <-ctx.Done():
			}
			if err := restart(ctx); err != nil {
				w.cfg.Logf("start kruise-manager again: %v", err)
				return
			}
			kd.mu.Lock()
			kd.to = time.Now()
			kd.mu.Unlock()
			w.cfg.Logf("kruise-manager ready again %.1fs into the burst", time.Since(b.start).Seconds())
		}}
	},
	check: func(ctx context.Context, w *chaosWorld, res *ChaosResult) { w.kruiseDown.check(ctx, w, res) },
}

// normalNodePod is a pod on the normal node marked for a CRR; every other
// one also names a quick-exit image, which a refused CRR falls back to.
func normalNodePod(run string, i int) *corev1.Pod {
	p := jobPod(run, i, false)
	if i%2 == 1 {
		p.Spec.Containers[1].Env = append(p.Spec.Containers[1].Env, corev1.EnvVar{Name: decision.EnvTerminateWithImage, Value: QuickExitImage})
	}
	return p
}

// crrPod is the pod a CRR name (decision.CRRName) belongs to.
func crrPod(crr string) string {
	if i := strings.LastIndex(crr, "-"); i > 0 {
		crr = crr[:i]
	}
	if i := strings.LastIndex(crr, "-"); i > 0 {
		crr = crr[:i]
	}
	return crr
}

// outageBound is how many CRR creates a pod can send while kruise-manager
// is down for d: the first, then one after each backoff step (backoff,
// doubling) that ends within d; one more for a create in flight as the
// outage began or ended.
func outageBound(d, backoff time.Duration) int {
	n, t := 1, time.Duration(0)
	for b := backoff; t+b <= d; b *= 2 {
		t += b
		n++
	}
	return n + 1
}

// podWrites is what the audit log shows of the controller's writes for one pod.
type podWrites struct {
	refused, created, patched int
	createdAfterUp            bool
	inOutage                  int
}

func (kd *kruiseDown) check(ctx context.Context, w *chaosWorld, res *ChaosResult) {
	fail := func(format string, args ...any) { res.Failures = append(res.Failures, fmt.Sprintf(format, args...)) }
	pass := func(format string, args ...any) { res.Checks = append(res.Checks, fmt.Sprintf(format, args...)) }
	kd.mu.Lock()
	from, to := kd.from, kd.to
	kd.mu.Unlock()
	if from.IsZero() || to.IsZero() {
		fail("kruise-manager was never taken down and brought back")
		return
	}
	timed, err := cluster.TimedMutatingRequests(w.audit, cluster.ControllerServiceAccountUser, Namespace)
	if err != nil {
		fail("audit log: %v", err)
		return
	}
	per, outageWrites := writesPerPod(timed, from, to)

	kube, _, _ := clients(w.cp.RestConfig)
	pods, err := kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: runLabel + "=chaos"})
	if err != nil {
		fail("list pods: %v", err)
		return
	}
	o := outcomes(pods.Items, per)
	refusedPods, refusedSwap, refusedCRR, badSwap, badCRR := o.refused, o.swap, o.crr, o.badSwap, o.badCRR
	res.Figures = map[string]float64{"pods": float64(len(pods.Items)), "completed": float64(o.completed),
		"outageSeconds": to.Sub(from).Seconds(), "podsRefused": float64(len(refusedPods)),
		"refusedWithImage": float64(refusedSwap), "refusedCRROnly": float64(refusedCRR), "writesDuringOutage": float64(outageWrites),
		"writes": float64(len(timed)), "writesPerPod": float64(len(timed)) / float64(max(1, len(pods.Items))), "refusedCreates": float64(refusedCreates(per))}
	if len(refusedPods) == 0 {
		fail("no CRR create was refused: the outage hit no pod")
		return
	}
	pass("%d pods had a CRR refused with 500 while kruise-manager was down (%.1fs)", len(refusedPods), to.Sub(from).Seconds())
	if badSwap > 0 {
		fail("%d of the %d refused pods with a quick-exit image were not swapped, or got a CRR after all", badSwap, refusedSwap)
	} else {
		pass("all %d refused pods with a quick-exit image were swapped, none got a CRR", refusedSwap)
	}
	if badCRR > 0 {
		fail("%d of the %d refused CRR-only pods did not get exactly one CRR after kruise-manager was back", badCRR, refusedCRR)
	} else {
		pass("all %d refused CRR-only pods got exactly one CRR, after kruise-manager was back", refusedCRR)
	}
	kd.checkOutageWrites(res, per, refusedPods, outageWrites, to.Sub(from))
	kd.checkWarnings(ctx, w, res, refusedPods)
}

// refusalOutcomes is what became of the pods whose CRR was refused.
type refusalOutcomes struct {
	refused                               []string
	completed, swap, crr, badSwap, badCRR int
}

// outcomes checks each refused pod's path: with a quick-exit image,
// swapped and never given a CRR; without, exactly one CRR, made once
// kruise-manager was back.
func outcomes(pods []corev1.Pod, per map[string]*podWrites) refusalOutcomes {
	var o refusalOutcomes
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded {
			o.completed++
		}
		pw := per[p.Name]
		if pw == nil || pw.refused == 0 {
			continue
		}
		o.refused = append(o.refused, p.Name)
		withImage := false
		for _, e := range p.Spec.Containers[1].Env {
			withImage = withImage || e.Name == decision.EnvTerminateWithImage
		}
		switch {
		case withImage:
			o.swap++
			if p.Spec.Containers[1].Image != QuickExitImage || pw.created > 0 {
				o.badSwap++
			}
		default:
			o.crr++
			if pw.created != 1 || !pw.createdAfterUp {
				o.badCRR++
			}
		}
	}
	return o
}

func refusedCreates(per map[string]*podWrites) int {
	n := 0
	for _, pw := range per {
		n += pw.refused
	}
	return n
}

// writesPerPod sorts the controller's CRR creates and pod patches by pod,
// and counts those made while kruise-manager was down (from..to).
func writesPerPod(timed []cluster.TimedRequest, from, to time.Time) (map[string]*podWrites, int) {
	per := map[string]*podWrites{}
	at := func(pod string) *podWrites {
		if per[pod] == nil {
			per[pod] = &podWrites{}
		}
		return per[pod]
	}
	outageWrites := 0
	for _, r := range timed {
		f := strings.Fields(r.Request)
		var pw *podWrites
		switch {
		case f[1] == "containerrecreaterequests" && f[0] == "create":
			pw = at(crrPod(f[2]))
			switch f[3] {
			case "500":
				pw.refused++
			case "201":
				pw.created++
				pw.createdAfterUp = pw.createdAfterUp || r.At.After(to)
			}
		case f[1] == "pods" && f[0] == "patch":
			pw = at(f[2])
			pw.patched++
		default:
			continue
		}
		if !r.At.Before(from) && !r.At.After(to) {
			pw.inOutage++
			outageWrites++
		}
	}
	return per, outageWrites
}

// checkOutageWrites: no retry storm. Each pod's writes during the outage
// stay within what the backoff allows.
func (kd *kruiseDown) checkOutageWrites(res *ChaosResult, per map[string]*podWrites, refusedPods []string, total int, outage time.Duration) {
	bound := outageBound(outage, decision.DefaultPolicy().RetryBackoff)
	worst, worstPod := 0, ""
	refusedMax := 0
	for name, pw := range per {
		if pw.inOutage > worst {
			worst, worstPod = pw.inOutage, name
		}
		refusedMax = max(refusedMax, pw.refused)
	}
	res.Figures["writesPerPodInOutageMax"] = float64(worst)
	res.Figures["writesPerRefusedPodInOutage"] = float64(total) / float64(len(refusedPods))
	res.Figures["refusedCreatesPerPodMax"] = float64(refusedMax)
	// A refused pod writes its refused creates, and at most one swap.
	if worst > bound+1 || refusedMax > bound {
		res.Failures = append(res.Failures, fmt.Sprintf("pod %s: %d writes during the outage, %d refused creates in all; the backoff allows %d creates",
			worstPod, worst, refusedMax, bound))
		return
	}
	res.Checks = append(res.Checks, fmt.Sprintf("no retry storm: %d writes during the outage (%.2f per refused pod, at most %d for one pod; at most %d refused creates per pod, the backoff allows %d)",
		total, res.Figures["writesPerRefusedPodInOutage"], worst, refusedMax, bound))
}

// checkWarnings: every refused pod carries a SidecarKillFailed Warning that
// names the 500 and kruise's webhook. The controller holds events back
// during a burst, so they are waited for.
func (kd *kruiseDown) checkWarnings(ctx context.Context, w *chaosWorld, res *ChaosResult, refusedPods []string) {
	kube, _, _ := clients(w.cp.RestConfig)
	var warned map[string][]string
	warnings := 0
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		list, err := kube.CoreV1().Events(Namespace).List(ctx, metav1.ListOptions{FieldSelector: "type=" + corev1.EventTypeWarning})
		if err != nil {
			res.Failures = append(res.Failures, fmt.Sprintf("list events: %v", err))
			return
		}
		warned, warnings = map[string][]string{}, 0
		for _, e := range list.Items {
			if e.Source.Component != "sidecar-terminator" && e.ReportingController != "sidecar-terminator" {
				continue
			}
			warnings += int(max(e.Count, 1))
			if e.Reason == decision.ReasonSidecarKillFailed {
				warned[e.InvolvedObject.Name] = append(warned[e.InvolvedObject.Name], e.Message)
			}
		}
		if len(warned) >= len(refusedPods) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
	}
	res.Figures["warnings"] = float64(warnings)
	res.Figures["podsWithSidecarKillFailed"] = float64(len(warned))
	var missing, unnamed []string
	want := fmt.Sprintf("failed calling webhook %q", kruisetest.WebhookName)
	for _, p := range refusedPods {
		msgs, ok := warned[p]
		if !ok {
			missing = append(missing, p)
			continue
		}
		named := false
		for _, m := range msgs {
			named = named || (strings.Contains(m, "HTTP 500") && strings.Contains(m, want))
		}
		if !named {
			unnamed = append(unnamed, p)
		}
	}
	sort.Strings(missing)
	switch {
	case len(missing) > 0:
		res.Failures = append(res.Failures, fmt.Sprintf("%d refused pods have no %s Warning (first: %s)", len(missing), decision.ReasonSidecarKillFailed, missing[0]))
	case len(unnamed) > 0:
		res.Failures = append(res.Failures, fmt.Sprintf("%d pods' %s Warnings do not name HTTP 500 and %s (first: %s: %v)", len(unnamed), decision.ReasonSidecarKillFailed, want, unnamed[0], warned[unnamed[0]]))
	default:
		res.Checks = append(res.Checks, fmt.Sprintf("every refused pod has a %s Warning naming HTTP 500 and %s (%d Warnings in all)", decision.ReasonSidecarKillFailed, want, warnings))
	}
}
