package reconciler

import (
	"context"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// Reader is the controller's view of the cluster: in production, informer
// caches. Every method is one the sync needs: none is found by type
// assertion, so a wrapper of a Reader (which embeds this interface) cannot
// hide one of them, as a wrapper of the Writer once hid the live reads.
type Reader interface {
	// Pod returns the pod, or an error for which apierrors.IsNotFound is true.
	Pod(namespace, name string) (*corev1.Pod, error)
	// Node returns what the named node says of itself (its labels,
	// kubeletVersion and providerID), and whether it is known.
	Node(name string) (decision.NodeFacts, bool)
	// KruiseDaemon reports whether the node is known, from OpenKruise's own
	// per-node objects (kube/daemons.go), to run a kruise-daemon, known to
	// run none, or neither, at now, given how long a daemon may take to show
	// itself (grace), and how that is known (for explain and Warnings). A
	// Reader with nothing to tell it by (OpenKruise's NodeImage API not
	// served) answers decision.DaemonUnknown: a CRR is tried.
	KruiseDaemon(node string, now time.Time, grace time.Duration) (decision.DaemonState, string)
	// CRRs returns the ContainerRecreateRequests this controller made for the pod.
	CRRs(pod *corev1.Pod) ([]*kruisev1alpha1.ContainerRecreateRequest, error)
	// CRRAPIAvailable reports whether the ContainerRecreateRequest API is served.
	CRRAPIAvailable() bool
	// RediscoverCRRAPI asks discovery again whether the CRR API is served;
	// the reconciler calls it when a CRR create answers 404 (the CRD was
	// removed while the controller ran). A Reader whose answer cannot
	// change (one that makes no CRR) does nothing.
	RediscoverCRRAPI()
}

// ConsideredReader is a Reader that can tell, without handing out the pod,
// whether the pod it holds under a name is one the decision considers
// (decision.Considered). kube's pod cache knows that of every version it
// holds (CachePod), and the simulator's cache asks the decision. A Reader
// that cannot tell has every wake synced (IdleWake).
type ConsideredReader interface {
	// PodConsidered reports whether a pod is held under the name (held),
	// and if so whether the decision considers it.
	PodConsidered(namespace, name string) (considered, held bool)
}

// Writer is how the controller changes the cluster: in production, API calls.
type Writer interface {
	// CreateCRR creates the CRR. With readPodFirst it first reads the pod
	// live and refuses, with a Conflict error, if the pod the CRR is owned by
	// (by UID) is gone: kruise resolves spec.podName to whichever pod has
	// that name when the CRR is admitted, so a CRR for a pod replaced under
	// the same name would stop the new pod's sidecars.
	CreateCRR(ctx context.Context, crr *kruisev1alpha1.ContainerRecreateRequest, readPodFirst bool) error
	// DeleteCRR deletes the named CRR; one already gone is not an error.
	DeleteCRR(ctx context.Context, namespace, name string) error
	// PatchPod applies a JSON patch (RFC 6902) to the pod.
	PatchPod(ctx context.Context, namespace, name string, jsonPatch []byte) error
	// PatchPodStatus applies a JSON patch to the pod's status subresource.
	PatchPodStatus(ctx context.Context, namespace, name string, jsonPatch []byte) error
	// AnnotatePod sets one annotation on the pod with the given UID (and on no
	// other pod of the same name), leaving the others as they are.
	AnnotatePod(ctx context.Context, namespace, name string, uid types.UID, key, value string) error
}

// Recorder records events; client-go's record.EventRecorder is one.
type Recorder interface {
	Event(object runtime.Object, eventtype, reason, message string)
}

// DefaultKruiseDaemonGrace is --kruise-daemon-grace's default. A daemon
// that exists shows itself well within it (openkruise/kruise v1.9.1):
// kruise-manager makes a node's NodeImage 30 s after the node turns ready
// (pkg/controller/nodeimage/nodeimage_controller.go,
// nodeImageCreationDelayAfterNodeReady), and kruise-daemon writes its status
// as soon as it starts (pkg/daemon/imagepuller/imagepuller_controller.go),
// so only the daemon's own pod start, an image pull on a new node at worst,
// lies between. kruise itself gives a daemon one minute to answer a CRR
// before failing it (pkg/controller/containerrecreaterequest/
// crr_controller.go, responseTimeout); five leave room for a slow pull. Too
// short a grace sends a pod on a new node to the image swap (or a Warning)
// while its daemon is still starting; too long only delays the swap on a
// node without one, by a failed CRR, for pods that finish that early.
const DefaultKruiseDaemonGrace = 5 * time.Minute
