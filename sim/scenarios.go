package sim

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// Container shapes used by the scenario table.
func env(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

var (
	markCRR    = env(decision.EnvTerminate, "true")
	markImage  = env(decision.EnvTerminateWithImage, QuickExitImage)
	markIgnore = env(decision.EnvIgnoreExitCode, "true")
)

func mainC(name string, lo, hi time.Duration, codes ...int32) C {
	if len(codes) == 0 {
		codes = []int32{0}
	}
	return C{Name: name, Seconds: Range{lo, hi}, ExitCodes: codes}
}

func job() C { return mainC("main", 5*time.Second, 60*time.Second) }

func sidecar(name, onSIGTERM string, marks ...corev1.EnvVar) C {
	return C{Name: name, Sidecar: true, OnSIGTERM: onSIGTERM, Env: marks}
}

func never(name string, cs ...C) Template {
	return Template{Name: name, RestartPolicy: corev1.RestartPolicyNever, Containers: cs}
}

func onFailure(name string, cs ...C) Template {
	return Template{Name: name, RestartPolicy: corev1.RestartPolicyOnFailure, Containers: cs}
}

func (t Template) virtual() Template               { t.Virtual = true; return t }
func (t Template) on(p decision.Platform) Template { t.Platform = p; return t }
func (t Template) expect(e Expect) Template        { t.Expect = e; return t }
func (t Template) weight(w int) Template           { t.Weight = w; return t }
func (t Template) annotate(k, v string) Template   { t.Annotations = map[string]string{k: v}; return t }

var (
	normalNodes  = []NodeGroup{{Count: 20}}
	virtualNodes = []NodeGroup{{Count: 5, Virtual: true}}
	mixedNodes   = []NodeGroup{{Count: 15}, {Count: 5, Virtual: true}}
)

// Scenarios is the named suite. Each row says in one line what it shows.
var Scenarios = []Scenario{
	{Name: "job-never-crr", Purpose: "Job, restartPolicy Never, sidecar marked WHEN_JOB_EXIT: one CRR, kruise-daemon stops it (OpenKruise e2e)",
		Nodes: normalNodes, Templates: []Template{never("never-crr", job(), sidecar("proxy", "exit:0", markCRR))}},
	{Name: "job-never-ignore-exit-code", Purpose: "Never, a sidecar that ignores SIGTERM plus IGNORE_EXIT_CODE: phase settled first, then SIGKILL after grace (OpenKruise e2e)",
		Nodes: normalNodes, Templates: []Template{
			never("ignore-ok", job(), sidecar("logger", "ignore", markCRR, markIgnore)),
			never("ignore-failed", mainC("main", 5*time.Second, 30*time.Second, 3), sidecar("logger", "ignore", markCRR, markIgnore)),
			never("ignore-two", job(), sidecar("proxy", "exit:0", markCRR), sidecar("logger", "ignore", markCRR, markIgnore))}},
	{Name: "job-onfailure-success", Purpose: "OnFailure, main exits 0: CRR, sidecar exits 0 and is not restarted (OpenKruise e2e)",
		Nodes: normalNodes, Templates: []Template{onFailure("onfailure-ok", job(), sidecar("proxy", "exit:0", markCRR))}},
	{Name: "job-onfailure-backofflimit", Purpose: "OnFailure, main fails then succeeds or exceeds backoffLimit: no kill while it can restart (OpenKruise e2e)",
		Nodes: normalNodes, Templates: []Template{
			onFailure("flaky", mainC("main", 2*time.Second, 10*time.Second, 1, 1, 0), sidecar("proxy", "exit:0", markCRR, markImage)),
			func() Template {
				t := onFailure("doomed", mainC("main", 2*time.Second, 5*time.Second, 1), sidecar("proxy", "exit:0", markCRR))
				t.BackoffLimit = 2
				return t
			}()}},
	{Name: "broadcast-never", Purpose: "broadcast-style job, one Never pod per node, CRR on every node at about the same time (OpenKruise e2e)",
		Pods: 40, Arrival: time.Second, Nodes: []NodeGroup{{Count: 40}}, Templates: []Template{never("bcast", job(), sidecar("proxy", "exit:0", markCRR))}},
	{Name: "broadcast-onfailure", Purpose: "broadcast-style job, one OnFailure pod per node, flaky mains (OpenKruise e2e)",
		Pods: 40, Arrival: time.Second, Nodes: []NodeGroup{{Count: 40}}, Templates: []Template{
			onFailure("bcast-of", mainC("main", 2*time.Second, 20*time.Second, 1, 0), sidecar("proxy", "exit:0", markCRR))}},
	{Name: "beside-kruise-terminator", Purpose: "OpenKruise's own SidecarTerminator on too, its daemon slow: noticed (SecondTerminator), yielded to, every pod finishes; no CRR beside kruise's once seen",
		Nodes: []NodeGroup{{Count: 20, Daemon: DaemonSpec{Pickup: 8 * time.Second}}}, Templates: []Template{never("both", job(), sidecar("proxy", "exit:0", markCRR)),
			onFailure("both-of", job(), sidecar("proxy", "exit:0", markCRR))}, KruiseTerminator: true},
	{Name: "normal-image-only", Purpose: "normal node, sidecar marked only with an image: image swap, no daemon needed",
		Nodes: normalNodes, Templates: []Template{never("img", job(), sidecar("proxy", "exit:0", markImage)),
			onFailure("img-of", job(), sidecar("proxy", "ignore", markImage))}},
	{Name: "normal-crr-and-image", Purpose: "normal node, both marks: CRR first, the image stays the fallback",
		Nodes: normalNodes, Templates: []Template{never("both", job(), sidecar("proxy", "exit:0", markCRR, markImage))}},
	{Name: "virtual-image", Purpose: "virtual node, image mark: in-place swap, the quick-exit image exits 0 after the pull",
		Nodes: virtualNodes, Templates: []Template{never("vk", job(), sidecar("proxy", "exit:0", markImage)).virtual(),
			onFailure("vk-of", job(), sidecar("proxy", "ignore", markCRR, markImage)).virtual()}},
	{Name: "virtual-no-image", Purpose: "virtual node, CRR mark only: no path, a Warning event, no write",
		Nodes: virtualNodes, Templates: []Template{never("vk-none", job(), sidecar("proxy", "exit:0", markCRR)).virtual().expect(ExpectWarning)}},
	{Name: "annotation-injected", Purpose: "injected proxy named by the sidecars annotation, image from the quick-exit annotation, on both node kinds",
		Nodes: mixedNodes, Templates: []Template{
			never("istio", job(), C{Name: "istio-proxy", Sidecar: true, Image: IstioImage, NoArgs: true}).
				annotate(decision.AnnotationSidecars, "istio-proxy"),
			withAnnotations(never("istio-vk", job(), C{Name: "istio-proxy", Sidecar: true, Image: IstioImage, NoArgs: true}).virtual(),
				decision.AnnotationSidecars, "istio-proxy", decision.AnnotationQuickExitImage, QuickExitImage)}},
	{Name: "no-crr-api", Purpose: "OpenKruise not installed: image swap where an image is known, a Warning for the rest",
		NoCRRAPI: true, Nodes: normalNodes, Templates: []Template{
			never("nokruise-img", job(), sidecar("proxy", "exit:0", markCRR, markImage)),
			never("nokruise-crr", job(), sidecar("proxy", "exit:0", markCRR)).expect(ExpectWarning)}},
	{Name: "no-crr-api-default-image", Purpose: "OpenKruise not installed, operator default quick-exit image: every plain-env pod finished by image swaps on normal nodes too",
		NoCRRAPI: true, DefaultQuickExitImage: QuickExitImage, Nodes: mixedNodes, Templates: []Template{
			never("nk-default", job(), sidecar("proxy", "exit:0", markCRR)),
			onFailure("nk-default-of", job(), sidecar("proxy", "exit:0", markCRR)),
			never("nk-default-vk", job(), sidecar("proxy", "exit:0", markCRR)).virtual(),
			never("nk-istio", job(), C{Name: "istio-proxy", Sidecar: true, Image: IstioImage, NoArgs: true}).annotate(decision.AnnotationSidecars, "istio-proxy")}},
	{Name: "ignored-pods", Purpose: "pods the controller must never write for: restartPolicy Always, no marks, only sidecars, unusable marks",
		Nodes: normalNodes, Templates: []Template{
			{Name: "always", RestartPolicy: corev1.RestartPolicyAlways, Containers: []C{job(), sidecar("proxy", "exit:0", markCRR)}, Expect: ExpectIgnored},
			never("unmarked", job(), C{Name: "proxy", OnSIGTERM: "exit:0"}).expect(ExpectIgnored),
			never("no-main", sidecar("a", "exit:0", markCRR), sidecar("b", "exit:0", markImage)).expect(ExpectIgnored),
			never("bad-mark", job(), C{Name: "proxy", OnSIGTERM: "exit:0", Env: []corev1.EnvVar{env(decision.EnvTerminate, "yes")}}).expect(ExpectIgnored)}},
	{Name: "sidecar-exits-nonzero", Purpose: "OnFailure sidecar exits 1 on SIGTERM and comes back: failed kill, then swap, or CRR retries then a Warning",
		Nodes: normalNodes, Templates: []Template{
			onFailure("comeback-img", job(), sidecar("proxy", "exit:1", markCRR, markImage)),
			onFailure("comeback-crr", job(), sidecar("proxy", "exit:1", markCRR)).expect(ExpectWarning)}},
	{Name: "sidecar-never-starts", Purpose: "a sidecar whose image cannot be pulled keeps the pod Pending: swap where an image is known, else a Warning",
		Nodes: mixedNodes, Templates: []Template{
			never("nostart-img", job(), C{Name: "proxy", Sidecar: true, Image: MissingImage, Env: []corev1.EnvVar{markCRR, markImage}}),
			never("nostart-vk", job(), C{Name: "proxy", Sidecar: true, Image: MissingImage, Env: []corev1.EnvVar{markImage}}).virtual(),
			never("nostart-crr", job(), C{Name: "proxy", Sidecar: true, Image: MissingImage, Env: []corev1.EnvVar{markCRR}}).expect(ExpectWarning)}},
	{Name: "init-and-native-sidecars", Purpose: "init containers and native sidecars are never classified or killed; the kubelet stops native sidecars itself",
		Nodes: normalNodes, Templates: []Template{func() Template {
			t := never("native", job(), sidecar("proxy", "exit:0", markCRR))
			t.Init = []C{mainC("setup", time.Second, 3*time.Second)}
			t.Native = []C{sidecar("mesh", "exit:0", markCRR)}
			return t
		}(), func() Template {
			t := onFailure("native-of", mainC("main", 3*time.Second, 20*time.Second, 1, 0), sidecar("proxy", "exit:0", markImage))
			t.Native = []C{sidecar("mesh", "exit:0")}
			return t
		}()}},
	{Name: "pods-deleted-midway", Purpose: "pods deleted while running or right after their mains finish: nothing wrong is written, nothing hangs",
		Nodes: mixedNodes, Templates: []Template{
			func() Template {
				t := never("del-run", job(), sidecar("proxy", "exit:0", markCRR))
				t.DeleteAt = Range{time.Second, 40 * time.Second}
				return t
			}(),
			func() Template {
				t := never("del-done", job(), sidecar("proxy", "exit:0", markCRR, markImage))
				t.DeleteAfterMainsDone = Range{0, 3 * time.Second}
				return t
			}()}},
	{Name: "allowlist", Purpose: "quick-exit allowlist: an image not on it is refused with a Warning; CRR still works where it can",
		AllowedImages: []string{QuickExitImage}, Nodes: mixedNodes, Templates: []Template{
			never("allowed", job(), sidecar("proxy", "exit:0", markImage)),
			never("refused-crr", job(), sidecar("proxy", "exit:0", markCRR, env(decision.EnvTerminateWithImage, UnknownQuickExit))),
			never("refused-vk", job(), sidecar("proxy", "exit:0", env(decision.EnvTerminateWithImage, UnknownQuickExit))).virtual().expect(ExpectWarning)}},
	{Name: "virtual-unknown-image", Purpose: "virtual node cannot pull the quick-exit image: ErrImagePull after the swap; the pod still ends or warns",
		Nodes: []NodeGroup{{Count: 5, Virtual: true, Missing: []string{QuickExitImage}}}, Templates: []Template{
			never("vk-404", job(), sidecar("proxy", "exit:0", markImage)).virtual().expect(ExpectEither)}},
	{Name: "scale-short-jobs", Purpose: "throughput: short Never jobs with a CRR-stopped sidecar arriving at 50 pods/s (run with --pods 100000)",
		Nodes: []NodeGroup{{Count: 200}}, Templates: []Template{never("short", mainC("main", 2*time.Second, 10*time.Second), sidecar("proxy", "exit:0", markCRR))}},
	{Name: "mixed-cluster", Purpose: "normal and virtual nodes, every kind of pod at once",
		Nodes: mixedNodes, Templates: mixedTemplates()},
	{Name: "fault-write-errors", Purpose: "writes fail with server errors and conflicts: retried with backoff, never doubled",
		Faults: Faults{WriteErrors: 0.2, Conflicts: 0.1}, Nodes: mixedNodes, Templates: mixedTemplates()},
	{Name: "fault-write-timeouts", Purpose: "writes time out, half of them applied anyway: the retry finds the CRR existing or the test op failing",
		Faults: Faults{WriteTimeouts: 0.3}, Nodes: mixedNodes, Templates: mixedTemplates()},
	{Name: "fault-cache-lag", Purpose: "the informer cache lags the world by seconds: expectations stop second writes",
		Faults: Faults{CacheLag: 4 * time.Second, CacheJitter: 0.9}, Nodes: mixedNodes, Templates: mixedTemplates()},
	{Name: "burst-backlog", Purpose: "a burst whose mains exit together meets a long queue and a cache lagging past the expectation timeout and the CRR deadline: one write per pod",
		Pods: 400, Arrival: time.Second, SyncCost: 20 * time.Millisecond, Faults: Faults{CacheLag: 70 * time.Second, CacheJitter: 0.5},
		Nodes: mixedNodes, Templates: []Template{
			never("burst-crr", mainC("main", 10*time.Second, 10*time.Second), sidecar("proxy", "exit:0", markCRR)),
			never("burst-vk", mainC("main", 10*time.Second, 10*time.Second), sidecar("proxy", "exit:0", markImage)).virtual()}},
	{Name: "burst-api-latency", Purpose: "2,000 pods whose mains end over 17 s, as the bench's burst does, with each API call costing the worker the API server's measured latency over 32 workers: one write per pod",
		Pods: 2000, Arrival: 17 * time.Second, Nodes: mixedNodes, Templates: []Template{
			never("burst-crr", mainC("main", 10*time.Second, 10*time.Second), sidecar("proxy", "exit:0", markCRR)),
			never("burst-vk", mainC("main", 10*time.Second, 10*time.Second), sidecar("proxy", "exit:0", markImage)).virtual()}},
	{Name: "fault-events", Purpose: "watch events dropped (seen again at relist), duplicated and reordered",
		Faults: Faults{DropEvents: 0.05, DupEvents: 0.2, ReorderEvents: 0.2, CacheLag: time.Second}, Nodes: mixedNodes, Templates: mixedTemplates()},
	{Name: "fault-controller-crash", Purpose: "the controller crashes and restarts, losing its expectations and queue",
		Faults: Faults{CrashEvery: 40 * time.Second, CacheLag: time.Second}, Nodes: mixedNodes, Templates: mixedTemplates()},
	{Name: "fault-leader-change", Purpose: "leadership moves; old and new leader both write for a moment, each with its own cache",
		Faults: Faults{LeaderEvery: 45 * time.Second, LeaderOverlap: 3 * time.Second, CacheLag: time.Second}, Nodes: mixedNodes, Templates: mixedTemplates()},
	{Name: "fault-daemon-down", Purpose: "kruise-daemon down on a third of the nodes: CRR deadline, then swap where an image is known, else retries and a Warning",
		Nodes: []NodeGroup{{Count: 20, Daemon: DaemonSpec{DownFraction: 0.34}}}, Templates: []Template{
			never("dd-both", job(), sidecar("proxy", "exit:0", markCRR, markImage)),
			never("dd-crr", job(), sidecar("proxy", "exit:0", markCRR)).expect(ExpectEither)}},
	{Name: "fault-daemon-slow-failing", Purpose: "kruise-daemon slow to pick CRRs up and failing some; down for a while on others",
		Nodes: []NodeGroup{{Count: 10, Daemon: DaemonSpec{Pickup: 20 * time.Second, FailRate: 0.3}}, {Count: 10, Daemon: DaemonSpec{DownFraction: 1, DownFor: 3 * time.Minute}}},
		Templates: []Template{
			never("slow-both", job(), sidecar("proxy", "exit:0", markCRR, markImage)),
			onFailure("slow-crr", job(), sidecar("proxy", "exit:0", markCRR)).expect(ExpectEither)}},
	{Name: "fault-crr-never-completed", Purpose: "kruise never completes a CRR: the controller's deadline counts it failed, swap or retry, then a Warning",
		Faults: Faults{CRRNeverCompleted: true}, Nodes: normalNodes, Templates: []Template{
			never("stuck-both", job(), sidecar("proxy", "exit:0", markCRR, markImage)),
			never("stuck-crr", job(), sidecar("proxy", "exit:0", markCRR)).expect(ExpectWarning)}},
	{Name: "pod-recreated-same-name", Purpose: "a pod deleted when its mains finish and recreated under the same name while the cache still shows the old one (image swap)",
		Faults: Faults{CacheLag: 2 * time.Second}, Nodes: normalNodes, Templates: []Template{
			func() Template {
				t := never("same-name", job(), sidecar("proxy", "exit:0", markImage))
				t.DeleteAfterMainsDone, t.Recreate = Range{0, 500 * time.Millisecond}, true
				return t
			}()}},
	{Name: "pod-recreated-same-name-settle", Purpose: "the same with ignore-exit-code: the phase-settling status patch lands on the new pod",
		Faults: Faults{CacheLag: 6 * time.Second}, Nodes: normalNodes, Templates: []Template{
			func() Template {
				t := never("same-name-settle", job(), sidecar("logger", "ignore", markCRR, markIgnore))
				t.DeleteAfterMainsDone, t.Recreate, t.Grace = Range{0, 500 * time.Millisecond}, true, 1
				return t
			}()}},
	{Name: "pod-recreated-same-name-crr", Purpose: "the same with a CRR: kruise resolves the CRR's podName to the new pod",
		Faults: Faults{CacheLag: 6 * time.Second}, Nodes: normalNodes, Templates: []Template{
			func() Template {
				t := never("same-name-crr", job(), sidecar("proxy", "exit:0", markCRR))
				t.DeleteAfterMainsDone, t.Recreate, t.Grace = Range{0, 500 * time.Millisecond}, true, 1
				return t
			}()}},
	{Name: "stop-order-two-stages", Purpose: "stop-order annotation, two stages: the shipper's CRR, then (its CRR deleted) the proxy's; unnamed sidecars first; swaps on virtual nodes",
		Nodes: mixedNodes, Templates: []Template{
			never("order-2", job(), sidecar("fluent-bit", "exit:0", markCRR), sidecar("istio-proxy", "exit:0", markCRR)).annotate(decision.AnnotationStopOrder, "fluent-bit,istio-proxy"),
			never("order-2-unnamed", job(), sidecar("statsd", "exit:0", markCRR), sidecar("fluent-bit", "exit:0", markCRR), sidecar("istio-proxy", "exit:0", markCRR)).
				annotate(decision.AnnotationStopOrder, "fluent-bit,istio-proxy"),
			never("order-2-vk", job(), sidecar("fluent-bit", "exit:0", markImage), sidecar("istio-proxy", "exit:0", markImage)).virtual().
				annotate(decision.AnnotationStopOrder, "fluent-bit,istio-proxy")}},
	{Name: "stop-order-three-stages", Purpose: "three named stages over CRRs, swaps, and OnFailure sidecars that exit non-zero and come back",
		Nodes: mixedNodes, Templates: []Template{
			never("order-3", job(), sidecar("c", "exit:0", markCRR), sidecar("b", "exit:0", markCRR), sidecar("a", "exit:0", markCRR)).annotate(decision.AnnotationStopOrder, "a,b,c"),
			never("order-3-vk", job(), sidecar("c", "exit:0", markImage), sidecar("b", "exit:0", markImage), sidecar("a", "exit:0", markImage)).virtual().annotate(decision.AnnotationStopOrder, "a,b,c"),
			onFailure("order-3-of", job(), sidecar("a", "exit:1", markCRR, markImage), sidecar("b", "exit:0", markCRR), sidecar("c", "exit:1", markCRR, markImage)).annotate(decision.AnnotationStopOrder, "a,b,c")}},
	{Name: "stop-order-ignores-sigterm", Purpose: "a stage whose sidecar ignores SIGTERM: SIGKILL after grace, or past the bound (slow daemon) a StopOrderHeldUp Warning and the next stage goes on",
		Nodes: []NodeGroup{{Count: 10}, {Count: 10, Daemon: DaemonSpec{Pickup: 20 * time.Second}}, {Count: 5, Virtual: true}}, Templates: []Template{
			never("order-deaf", job(), sidecar("fluent-bit", "ignore", markCRR), sidecar("istio-proxy", "exit:0", markCRR)).annotate(decision.AnnotationStopOrder, "fluent-bit,istio-proxy"),
			never("order-deaf-3", job(), sidecar("a", "exit:0", markCRR), sidecar("b", "ignore", markCRR), sidecar("c", "exit:0", markCRR)).annotate(decision.AnnotationStopOrder, "a,b,c"),
			never("order-deaf-vk", job(), sidecar("fluent-bit", "ignore", markImage), sidecar("istio-proxy", "exit:0", markImage)).virtual().annotate(decision.AnnotationStopOrder, "fluent-bit,istio-proxy")}},
	{Name: "stop-order-mixed-paths", Purpose: "one order over CRR sidecars and image-only (swapped) sidecars on a normal node, in both orders",
		Nodes: normalNodes, Templates: []Template{
			never("order-crr-swap", job(), sidecar("fluent-bit", "exit:0", markCRR), sidecar("istio-proxy", "exit:0", markImage)).annotate(decision.AnnotationStopOrder, "fluent-bit,istio-proxy"),
			never("order-swap-crr", job(), sidecar("fluent-bit", "exit:0", markImage), sidecar("istio-proxy", "exit:0", markCRR)).annotate(decision.AnnotationStopOrder, "fluent-bit,istio-proxy"),
			never("order-both-swap", job(), sidecar("x", "exit:0", markCRR, markImage), sidecar("fluent-bit", "exit:0", markImage), sidecar("istio-proxy", "exit:0", markCRR)).
				annotate(decision.AnnotationStopOrder, "istio-proxy")}},
	{Name: "stop-order-bad-input", Purpose: "orders naming a main container, an unknown name, a name twice, an ignore-exit-code sidecar: a Warning, all stopped at once",
		Nodes: normalNodes, Templates: []Template{
			never("order-main", job(), sidecar("proxy", "exit:0", markCRR)).annotate(decision.AnnotationStopOrder, "main,proxy"),
			never("order-unknown", job(), sidecar("proxy", "exit:0", markCRR)).annotate(decision.AnnotationStopOrder, "proxi"),
			never("order-twice", job(), sidecar("log", "exit:0", markCRR), sidecar("proxy", "exit:0", markCRR)).annotate(decision.AnnotationStopOrder, "log,proxy,log"),
			never("order-ignoring", job(), sidecar("log", "exit:0", markCRR), sidecar("proxy", "ignore", markCRR, markIgnore)).annotate(decision.AnnotationStopOrder, "proxy,log")}},
}

func withAnnotations(t Template, kv ...string) Template {
	t.Annotations = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		t.Annotations[kv[i]] = kv[i+1]
	}
	return t
}

// mixedTemplates is a cluster's worth of pods of every kind, each with a
// termination path that survives the fault scenarios, plus ignored pods.
func mixedTemplates() []Template {
	return []Template{
		never("m-crr", job(), sidecar("proxy", "exit:0", markCRR)).weight(3),
		never("m-both", job(), sidecar("proxy", "ignore", markCRR, markImage)).weight(2),
		never("m-ignore", job(), sidecar("logger", "ignore", markCRR, markIgnore)),
		onFailure("m-of", mainC("main", 3*time.Second, 30*time.Second, 1, 0), sidecar("proxy", "exit:0", markCRR, markImage)).weight(2),
		onFailure("m-of-comeback", job(), sidecar("proxy", "exit:1", markCRR, markImage)),
		never("m-vk", job(), sidecar("proxy", "exit:0", markImage)).virtual().weight(2),
		never("m-vk-none", job(), sidecar("proxy", "exit:0", markCRR)).virtual().expect(ExpectWarning),
		never("m-unmarked", job(), C{Name: "proxy", OnSIGTERM: "exit:0"}).expect(ExpectIgnored),
	}
}

// Lookup returns the named scenario.
func Lookup(name string) (Scenario, error) {
	for _, sc := range Scenarios {
		if sc.Name == name {
			return sc, nil
		}
	}
	names := make([]string, len(Scenarios))
	for i, sc := range Scenarios {
		names[i] = sc.Name
	}
	sort.Strings(names)
	return Scenario{}, fmt.Errorf("no scenario %q; known: %v", name, names)
}
