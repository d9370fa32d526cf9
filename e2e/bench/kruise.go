package bench

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// OpenKruise's own SidecarTerminator is the benchmark's third terminator:
// kruise-manager (github.com/openkruise/kruise v1.9.1, built by e2e/cluster)
// with its SidecarTerminator gate on, against the same API server, bursted
// like the others. What it needs and does, read from that version:
//
//   - main.go: the client runs at --rest-config-qps=30, --rest-config-burst=50
//     unless told otherwise (OpenKruise's chart, openkruise/charts
//     versions/kruise/1.8.0/values.yaml, sets neither); controllers are set up
//     only once its webhooks serve (webhook.WaitReady), and its webhook
//     controller needs both webhook configurations to exist.
//   - pkg/util/client/client.go (NewClientFromManager): each
//     controller gets a client of its own, and controller-runtime v0.20.2's
//     client (pkg/client/client_rest_resources.go, apiutil.RESTClientForGVK)
//     makes one REST client, with its own token bucket, per resource type:
//     the SidecarTerminator's pod updates and its CRR creates each get the
//     whole QPS and burst.
//   - pkg/features/kruise_features.go: the SidecarTerminator gate is alpha and
//     off by default.
//   - pkg/controller/sidecarterminator/sidecar_terminator_controller.go: 3
//     workers (--sidecarterminator-workers); every pod event that passes
//     isInterestingPod (utils.go: not deleting, not Pending, restartPolicy
//     not Always, a container marked KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true
//     or ..._WITH_IMAGE=<image> and not yet terminated, and under Never
//     every other container terminated) is enqueued.
//   - virtual_kubelet_manager.go: the reconcile reads the pod's Node from its
//     cache, so the Node object must exist (else it errors and requeues); a
//     Node labelled type=virtual-kubelet (pkg/util/virtual_kubelet.go) gets
//     the in-place image update (inplace_update_action.go: a Get and an
//     Update of the pod), any other a CRR (kill_container_action.go: named
//     sidecar-termination-<pod UID>, owned by the pod, ForceRecreate,
//     FailurePolicy Ignore). Nothing there looks at the Node's readiness.
//   - pkg/webhook/containerrecreaterequest/mutating/crr_mutating_handler.go:
//     its CRR passes kruise's webhook only if the pod is active, bound to an
//     existing Node, and each named container has a status with a
//     containerID.
//
// The bench's pods meet all of it as they are (restartPolicy Never, Running,
// bound to existing Nodes, the same marks as the controller reads, container
// IDs in their statuses), and its watch already counts either action.
//
// kruise-manager also makes a NodeImage for every Ready node
// (pkg/controller/nodeimage/nodeimage_controller.go), which the controller
// reads to tell which nodes lack a kruise-daemon (controller/kube/daemons.go).
// The bench's Nodes have no Ready condition, so none is made; each kruise
// burst checks that, so that the other bursts meet the same cluster.
//
// kruise-manager's webhooks have failurePolicy Fail, so they are registered
// only while it runs: each of its bursts starts it (which registers them),
// and removes them before it stops, so no other burst meets them.

// KruiseShippedQPS and KruiseShippedBurst are kruise-manager's client
// limits as OpenKruise ships them (main.go's flag defaults).
const (
	KruiseShippedQPS   = 30
	KruiseShippedBurst = 50
	// kruiseWorkers is its SidecarTerminator's concurrency as shipped.
	kruiseWorkers = 3
	// KruiseUser is the identity kruise-manager runs as in the bench, so
	// that the audit log tells its writes apart.
	KruiseUser = "bench:kruise-manager"
)

// KruiseSetting is one way the bench runs kruise-manager.
type KruiseSetting struct {
	QPS   int `json:"qps"`
	Burst int `json:"burst"`
}

// Shipped says whether these are OpenKruise's own defaults.
func (s KruiseSetting) Shipped() bool {
	return s.QPS == KruiseShippedQPS && s.Burst == KruiseShippedBurst
}

// Name is the setting's name in tables.
func (s KruiseSetting) Name() string {
	if s.Shipped() {
		return fmt.Sprintf("OpenKruise %s, as shipped (QPS %d)", cluster.KruiseVersion, s.QPS)
	}
	return fmt.Sprintf("OpenKruise %s, QPS %d", cluster.KruiseVersion, s.QPS)
}

// options are kruise-manager's options for the setting: at the shipped
// limits the flags are left out, so it runs exactly as it ships.
func (s KruiseSetting) options() cluster.KruiseManagerOptions {
	o := cluster.KruiseManagerOptions{SidecarTerminator: true, User: KruiseUser}
	if !s.Shipped() {
		o.QPS, o.Burst = s.QPS, s.Burst
	}
	return o
}

// kruiseSettings are the settings a run bursts: as shipped (unless
// KruiseRaisedOnly), then raised if a raised QPS is given.
func (c Config) kruiseSettings() []KruiseSetting {
	if !c.Kruise {
		return nil
	}
	var out []KruiseSetting
	if !c.KruiseRaisedOnly || c.KruiseQPS <= 0 {
		out = append(out, KruiseSetting{QPS: KruiseShippedQPS, Burst: KruiseShippedBurst})
	}
	if c.KruiseQPS > 0 {
		out = append(out, KruiseSetting{QPS: c.KruiseQPS, Burst: max(c.KruiseBurst, c.KruiseQPS)})
	}
	return out
}

// KruiseColumn is one kruise-manager setting's figures over the run.
type KruiseColumn struct {
	Setting    KruiseSetting `json:"setting"`
	Terminator string        `json:"terminator"`
	// RSSInitial is kruise-manager's RSS once its caches hold the
	// background pods (its probe pod acted on), in its first burst.
	RSSInitial int64 `json:"rssInitial"`
	// WritesPerPod counts kruise-manager's mutating requests (events and
	// leases aside) from just before each of its bursts' pods are created
	// until they are deleted, per pod of those bursts.
	WritesPerPod float64  `json:"writesPerPod"`
	WriteKinds   []string `json:"writeKinds"`
	// P99Ratio is the median over the rounds of the controller's p99 over
	// this column's.
	P99Ratio float64 `json:"p99Ratio"`

	writes []string
}

// kruiseRound starts kruise-manager with the i-th setting, bursts it, and
// stops it again.
func (w *world) kruiseRound(ctx context.Context, rep *Report, round *Round, i int, run string) (err error) {
	col := &rep.Kruise[i]
	mgr, err := cluster.StartKruiseManager(ctx, w.cp, col.Setting.options())
	if err != nil {
		return err
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		rmErr := cluster.RemoveKruiseWebhookConfigs(ctx, w.kube)
		if err := mgr.Stop(10 * time.Second); err != nil {
			return err
		}
		return rmErr
	}
	defer func() {
		if serr := stop(); err == nil {
			err = serr
		}
	}()
	if err := w.kruiseProbe(ctx, run+"-probe", mgr.LogPath); err != nil {
		return err
	}
	if col.RSSInitial == 0 {
		col.RSSInitial, _ = rssBytes(mgr.PID)
		w.cfg.Logf("%s ready: RSS %s", col.Terminator, mib(col.RSSInitial))
	}
	time.Sleep(2 * time.Second) // the audit log is written in 1 s batches
	before, err := cluster.MutatingRequests(w.audit, KruiseUser)
	if err != nil {
		return err
	}
	opts := w.burstOptions()
	opts.patience = kruisePatience(w.cfg.BurstPods, col.Setting.QPS)
	res, err := runBurstWith(ctx, w.kube, w.kruise, run, w.cfg.BurstPods, mgr.PID, w.cfg.Logf, opts)
	if err != nil {
		return err
	}
	res.Terminator = col.Terminator
	round.Kruise[i] = res
	time.Sleep(3 * time.Second) // its follow-up writes, then the audit batch
	after, err := cluster.MutatingRequests(w.audit, KruiseUser)
	if err != nil {
		return err
	}
	col.writes = append(col.writes, newWrites(before, after)...)
	if err := stop(); err != nil {
		return err
	}
	if err := w.noNodeImages(ctx); err != nil {
		return err
	}
	return w.clearRun(ctx, run)
}

var nodeImages = schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1beta1", Resource: "nodeimages"}

// noNodeImages fails if kruise-manager left NodeImages behind.
func (w *world) noNodeImages(ctx context.Context) error {
	dyn, err := dynamic.NewForConfig(w.cp.RestConfig)
	if err != nil {
		return err
	}
	list, err := dyn.Resource(nodeImages).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list NodeImages: %w", err)
	}
	if n := len(list.Items); n > 0 {
		return fmt.Errorf("kruise-manager made %d NodeImages (e.g. %s): the other bursts would not meet the same cluster", n, list.Items[0].GetName())
	}
	return nil
}

// newWrites is what after (a later read of the same append-only audit log)
// holds beyond before.
func newWrites(before, after []string) []string {
	if len(after) <= len(before) {
		return nil
	}
	return after[len(before):]
}

// kruisePatience is how long to wait for kruise-manager after the last main
// exit: its client limit, not the API server, may bound a burst (5,000 pods
// at 30 QPS take about three minutes), so the wait grows with it.
func kruisePatience(pods, qps int) time.Duration {
	d := time.Minute + time.Duration(pods)*10*time.Millisecond
	if qps > 0 {
		d += time.Duration(2 * float64(pods) / float64(qps) * float64(time.Second))
	}
	return d
}

// KruiseCRRName is the name kruise's SidecarTerminator gives its CRR for a
// pod (kill_container_action.go, getCRRName).
func KruiseCRRName(podUID types.UID) string {
	return fmt.Sprintf("sidecar-termination-%s", podUID)
}

// kruiseProbe waits until kruise-manager's SidecarTerminator acts on one
// finished pod: its controllers start only after its webhooks serve and its
// caches hold every pod, which readiness alone does not say. The probe pod
// and its CRR are deleted again.
func (w *world) kruiseProbe(ctx context.Context, run, logPath string) error {
	b := &burst{kube: w.kube, run: run}
	if err := b.create(ctx, 1, 1); err != nil {
		return fmt.Errorf("kruise probe: %w", err)
	}
	pod := b.pods[0]
	now := time.Now()
	if _, err := setStatus(ctx, w.kube, pod, corev1.PodRunning, terminated(now), running(now)); err != nil {
		return fmt.Errorf("kruise probe: end its main: %w", err)
	}
	name := KruiseCRRName(pod.UID)
	start := time.Now()
	for {
		// Any error but the CRR's absence is the API server's, and passes.
		if _, err := w.kruise.AppsV1alpha1().ContainerRecreateRequests(Namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(start) > 5*time.Minute {
			return fmt.Errorf("kruise-manager made no CRR %s for its probe pod in 5m (log: %s)", name, logPath)
		}
		time.Sleep(250 * time.Millisecond)
	}
	w.cfg.Logf("kruise-manager acted on its probe pod %.1fs after its main exit", time.Since(start).Seconds())
	return w.clearRun(ctx, run)
}
