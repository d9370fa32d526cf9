package sim

import (
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// Scenarios of a cluster that says no (issue 15): kruise's CRR webhook
// refusing, the CRD removed, quick-exit images that never start, CRRs
// deleted while their pod runs, grace periods longer than the CRR deadline.
// Each holds the liveness invariant (every pod with a path completes, every
// pod without one carries a Warning, within the bound) and the checker's
// safety rules (no sidecar stopped while a main can still run, no second
// stop within the first's grace period, no CRR past the attempts).
func init() { Scenarios = append(Scenarios, refusalScenarios...) }

var (
	refusedBoth = never("ref-both", job(), sidecar("proxy", "exit:0", markCRR, markImage))
	refusedCRR  = never("ref-crr", job(), sidecar("proxy", "exit:0", markCRR))
)

var refusalScenarios = []Scenario{
	// Item 1: every refusal is a decision input.
	{Name: "crr-webhook-down", Purpose: "kruise-manager down for the first 150 s (its CRR webhook, failurePolicy Fail, answers 500): swapped where an image is known, else a Warning and completion once it is back",
		Faults: Faults{CRRWebhook: WebhookDown, CRRWebhookFor: 150 * time.Second}, Nodes: normalNodes, Templates: []Template{
			refusedBoth.expect(ExpectWarnedTerminal), refusedCRR.expect(ExpectWarnedTerminal)}},
	{Name: "crr-webhook-gate-off", Purpose: "kruise's KruiseDaemon feature gate off (every CRR denied 403, the API still served): swap where an image is known, else a Warning at once",
		Faults: Faults{CRRWebhook: WebhookGateOff}, Nodes: normalNodes, Templates: []Template{
			refusedBoth.expect(ExpectWarnedTerminal), refusedCRR.expect(ExpectWarning)}},
	{Name: "crr-webhook-lagging", Purpose: "kruise's webhook answers 400 (its pod cache lacks the container ID) for 40 s: retried with backoff, every pod completes",
		Faults: Faults{CRRWebhook: WebhookLagging, CRRWebhookFrom: 10 * time.Second, CRRWebhookFor: 40 * time.Second}, Nodes: normalNodes, Templates: []Template{
			refusedBoth, refusedCRR}},
	{Name: "crd-removed", Purpose: "OpenKruise's CRD removed mid-run (creates answer 404, CRRs gone): the API is rediscovered as gone; swaps where an image is known, else a Warning",
		Faults: Faults{CRRWebhook: CRDRemoved, CRRWebhookFrom: 45 * time.Second}, Nodes: normalNodes, Templates: []Template{
			refusedBoth, refusedCRR.expect(ExpectEither)}},
	{Name: "crr-refused-default-image", Purpose: "CRRs denied (403) and the operator's default quick-exit image: plain-env sidecars are swapped to it and every pod completes",
		Faults: Faults{CRRWebhook: WebhookGateOff}, DefaultQuickExitImage: QuickExitImage, Nodes: normalNodes, Templates: []Template{
			refusedBoth.expect(ExpectWarnedTerminal), refusedCRR.expect(ExpectWarnedTerminal)}},
	{Name: "crd-removed-default-image", Purpose: "the CRD removed mid-run, with a default quick-exit image: every pod completes, by CRR before and by swap after",
		Faults: Faults{CRRWebhook: CRDRemoved, CRRWebhookFrom: 45 * time.Second}, DefaultQuickExitImage: QuickExitImage, Nodes: normalNodes, Templates: []Template{
			refusedBoth, refusedCRR}},
	{Name: "crd-removed-mid-stop", Purpose: "the CRD removed while kruise-daemon stops sidecars that drain until SIGKILL: the CRRs go, their stops do not; each remembered stop gets its deadline and grace period before a swap, so no second stop lands in it",
		Faults: Faults{CRRWebhook: CRDRemoved, CRRWebhookFrom: 60 * time.Second, CacheLag: 2 * time.Second}, Nodes: normalNodes, Templates: []Template{
			never("rm-both", job(), sidecar("proxy", "ignore", markCRR, markImage)),
			never("rm-crr", job(), sidecar("proxy", "ignore", markCRR)).expect(ExpectEither)}},
	{Name: "crd-removed-then-restart", Purpose: "the CRD removed while kruise-daemon stops sidecars, and the controller crashing often: a controller that starts after the removal remembers no CRR, so on a node a daemon serves its swaps wait the pod's grace period from when it found the API gone; no second stop lands in the first (soak seeds 405, 460)",
		Faults: Faults{CRRWebhook: CRDRemoved, CRRWebhookFrom: 60 * time.Second, CrashEvery: 30 * time.Second, CacheLag: 2 * time.Second}, Nodes: normalNodes, Templates: []Template{
			never("rr-both", job(), sidecar("proxy", "ignore", markCRR, markImage)),
			never("rr-crr", job(), sidecar("proxy", "ignore", markCRR)).expect(ExpectEither)}},
	{Name: "crd-removed-leader-moves", Purpose: "the CRD removed while kruise-daemon stops sidecars that drain for 120 s, and leadership moving every 40 s on average to a replica with an empty memory: the swap's wait counts from when a replica first found the API gone, as recorded on the pod, not from each new leader's first look, so every pod completes and no second stop lands in the first (soak seed 245)",
		Faults: Faults{CRRWebhook: CRDRemoved, CRRWebhookFrom: 60 * time.Second, LeaderEvery: 40 * time.Second, CacheLag: 2 * time.Second}, Nodes: normalNodes, Templates: crdRemovedLongGraceTemplates()},

	// A restart of kube-apiserver: writes refused (no connection), then
	// denied with 403 while its RBAC caches sync. A 403 seen once is asked
	// again after the short backoff, so every pod completes; found by make
	// chaos, where a pod was given up after one 403.
	{Name: "apiserver-restart-403", Purpose: "kube-apiserver down 10 s from 30 s, then answering every write 403 for 5 s until its RBAC caches sync: no pod given up, every pod completes",
		Faults: Faults{APIServerDownFrom: 30 * time.Second, APIServerDownFor: 10 * time.Second, AuthzUnsyncedFor: 5 * time.Second}, Nodes: mixedNodes, Templates: []Template{
			never("rst-crr", job(), sidecar("proxy", "exit:0", markCRR)),
			never("rst-vk", job(), sidecar("proxy", "exit:0", markImage)).virtual()}},

	// Item 2: the swap is followed through.
	{Name: "swap-image-not-pulled", Purpose: "the quick-exit image cannot be pulled on any node: the swapped sidecar waits in ErrImagePull/ImagePullBackOff and a Warning names it",
		Nodes: []NodeGroup{{Count: 10, Missing: []string{QuickExitImage}}, {Count: 5, Virtual: true, Missing: []string{QuickExitImage}}}, Templates: []Template{
			never("nopull", job(), sidecar("proxy", "exit:0", markImage)).expect(ExpectWarning),
			never("nopull-vk", job(), sidecar("proxy", "exit:0", markImage)).virtual().expect(ExpectWarning),
			never("nopull-crr", job(), sidecar("proxy", "exit:0", markCRR, markImage))}},
	{Name: "provider-ignores-image-updates", Purpose: "a virtual-kubelet provider that never restarts a container whose image changed: a Warning says the node still runs the old image",
		Nodes: []NodeGroup{{Count: 5, Virtual: true, IgnoresImageUpdates: true}}, Templates: []Template{
			never("deaf-vk", job(), sidecar("proxy", "exit:0", markImage)).virtual().expect(ExpectWarning)}},

	// Item 3: attempts never reset.
	{Name: "crr-ttl-mid-pod", Purpose: "kruise deletes finished CRRs 1 s after they end while an OnFailure sidecar keeps coming back: never more CRRs than the attempts, then a Warning",
		Faults: Faults{CRRTTL: time.Second}, MaxCRRsPerPod: 3, Nodes: normalNodes, Templates: []Template{
			onFailure("ttl-crr", job(), sidecar("proxy", "exit:1", markCRR)).expect(ExpectWarning),
			onFailure("ttl-both", job(), sidecar("proxy", "exit:1", markCRR, markImage))}},

	// Item 7: which nodes can run a CRR.
	{Name: "node-without-daemon", Purpose: "half the normal nodes run no kruise-daemon (their NodeImage never written by one): swaps or an immediate Warning there, never a CRR; CRRs elsewhere",
		Nodes: []NodeGroup{{Count: 10}, {Count: 10, NoDaemon: true}}, Templates: []Template{
			refusedBoth, refusedCRR.expect(ExpectEither), onFailure("nd-of", job(), sidecar("proxy", "exit:1", markCRR, markImage))}},
	{Name: "node-without-daemon-default-image", Purpose: "nodes without kruise-daemon and the operator's default quick-exit image: every plain-env pod completes, by swap there and by CRR elsewhere",
		DefaultQuickExitImage: QuickExitImage, Nodes: []NodeGroup{{Count: 10}, {Count: 10, NoDaemon: true}}, Templates: []Template{
			refusedBoth, refusedCRR}},

	// Item 4: settling is idempotent.
	{Name: "settle-phase-written-back", Purpose: "the kubelet writes its cached phase (Running) back over every settle once: the re-settle replaces the condition and restarts the grace wait",
		Faults: Faults{KubeletPhaseWriteBack: 1}, Nodes: normalNodes, Templates: []Template{
			never("wb-ignore", job(), sidecar("logger", "ignore", markCRR, markIgnore)),
			never("wb-ignore-failed", mainC("main", 5*time.Second, 30*time.Second, 3), sidecar("logger", "ignore", markCRR, markIgnore)),
			never("wb-two", job(), sidecar("proxy", "exit:0", markCRR), sidecar("logger", "ignore", markCRR, markIgnore))}},
	{Name: "settle-written-back-unseen", Purpose: "the same, with the controller's watch losing the write-back's event (seen at the relist, minutes later, past the kubelet's grace): a stop past the grace reads the live phase first, and settles again where the kubelet wrote it back, never stopping a sidecar of a Running pod",
		Faults: Faults{KubeletPhaseWriteBack: 1, WriteBackUnseen: true, CacheLag: time.Second}, Nodes: normalNodes, Templates: []Template{
			never("wbu-ignore", job(), sidecar("logger", "ignore", markCRR, markIgnore)),
			never("wbu-ignore-failed", mainC("main", 5*time.Second, 30*time.Second, 3), sidecar("logger", "ignore", markCRR, markIgnore)),
			never("wbu-two", job(), sidecar("proxy", "exit:0", markCRR), sidecar("logger", "ignore", markCRR, markIgnore))}},

	// Item 6: expectations are revisited.
	{Name: "crr-label-stripped", Purpose: "a policy engine strips our label from every CRR and kruise never acts on them: nothing wakes the pod, the expectation's timeout does; then a Warning, and a swap where an image is known",
		Faults: Faults{CRRLabelStripped: true, CRRNeverCompleted: true}, Nodes: normalNodes, Templates: []Template{
			refusedBoth.expect(ExpectWarnedTerminal), refusedCRR.expect(ExpectWarning)}},
	{Name: "crr-label-stripped-kruise-acts", Purpose: "a policy engine strips our label from every CRR while kruise acts on them, creates time out after they were applied, and leadership moves: a CRR met under our name with every other mark of ours is ours, followed through without the cache; no swap or second CRR lands in its stop",
		Faults: Faults{CRRLabelStripped: true, WriteTimeouts: 0.3, LeaderEvery: 40 * time.Second}, Nodes: normalNodes, Templates: []Template{
			never("strip-both", job(), sidecar("proxy", "ignore", markCRR, markImage)),
			never("strip-crr", job(), sidecar("proxy", "ignore", markCRR)).expect(ExpectEither),
			never("strip-order", job(), sidecar("s0", "ignore", markCRR), sidecar("s1", "exit:0", markCRR, markImage)).
				annotate(decision.AnnotationStopOrder, "s0,s1").expect(ExpectEither)}},

	// A CRR taken up just before its deadline: the stop under way is waited for.
	{Name: "crr-picked-up-late", Purpose: "kruise-daemon takes CRRs up late, some just before their deadline, and the sidecar drains until SIGKILL: the controller waits out the grace period of the stop under way before it swaps, so no second stop lands in it; a CRR-only sidecar whose every CRR is taken up too late gets a Warning",
		Nodes: []NodeGroup{{Count: 20, Daemon: DaemonSpec{Pickup: 50 * time.Second}}}, Templates: []Template{
			never("late-both", job(), sidecar("proxy", "ignore", markCRR, markImage)),
			never("late-crr", job(), sidecar("proxy", "ignore", markCRR)).expect(ExpectEither)}},

	// Item 5: deadlines fit the pod.
	{Name: "crr-deadline-long-grace", Purpose: "terminationGracePeriodSeconds 120 and a sidecar that drains until SIGKILL: the CRR's deadline covers the grace period, so no swap or second CRR lands during the stop",
		Nodes: normalNodes, Templates: []Template{func() Template {
			t := never("grace-both", job(), sidecar("proxy", "ignore", markCRR, markImage))
			t.Grace = 120
			return t
		}(), func() Template {
			t := never("grace-crr", job(), sidecar("proxy", "ignore", markCRR))
			t.Grace = 120
			return t
		}()}},

	// The stop window is carried by the CRRs themselves.
	{Name: "crr-window-short-ttl-leader-moves", Purpose: "the operator's CRR TTL (5 s) is far shorter than the pods' grace period (120 s), kruise-daemon takes CRRs up 100 s late (its stop then drains past the CRR's deadline), and leadership moves every 40 s to a replica with an empty memory: every CRR outlives its stop window, so no new leader stops a draining sidecar again",
		CRRTTLSetting: 5 * time.Second, Faults: Faults{LeaderEvery: 40 * time.Second},
		Nodes: []NodeGroup{{Count: 20, Daemon: DaemonSpec{Pickup: 100 * time.Second}}}, Templates: longGraceWindowTemplates()},
}

// longGraceWindowTemplates are sidecars that drain for their whole grace
// period (120 s) under a CRR, alone, with an image to fall back to, and in a
// stop order.
func longGraceWindowTemplates() []Template {
	var out []Template
	for _, t := range []Template{
		never("window-crr", job(), sidecar("proxy", "ignore", markCRR)).expect(ExpectEither),
		never("window-both", job(), sidecar("proxy", "ignore", markCRR, markImage)),
		never("window-order", job(), sidecar("s0", "ignore", markCRR), sidecar("s1", "exit:0", markCRR)).
			annotate(decision.AnnotationStopOrder, "s0,s1").expect(ExpectEither),
	} {
		t.Grace = 120
		out = append(out, t)
	}
	return out
}

// crdRemovedLongGraceTemplates are sidecars that drain for their whole grace
// period (120 s) under a CRR, with an image to swap to once the CRR API is
// gone, alone and in a stop order.
func crdRemovedLongGraceTemplates() []Template {
	var out []Template
	for _, t := range []Template{
		never("lm-both", job(), sidecar("proxy", "ignore", markCRR, markImage)),
		never("lm-order", job(), sidecar("s0", "ignore", markCRR, markImage), sidecar("s1", "exit:0", markCRR, markImage)).
			annotate(decision.AnnotationStopOrder, "s0,s1"),
	} {
		t.Grace = 120
		out = append(out, t)
	}
	return out
}
