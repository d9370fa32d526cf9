package app

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// kruiseTerminatorEventReason is the reason of the Normal event OpenKruise's
// own SidecarTerminator records on each pod it acts on
// (github.com/openkruise/kruise v1.9.1, pkg/controller/sidecarterminator/
// kill_container_action.go and inplace_update_action.go).
const kruiseTerminatorEventReason = "SidecarTerminator"

// checkKruiseTerminator looks once, when this replica starts to lead, for a
// sign that OpenKruise's SidecarTerminator acts in the cluster: one of its
// events (kept for the API server's --event-ttl, an hour by default). One
// list, served from the API server's watch cache; found, it is logged and
// the reconciler looks for kruise's CRR before each pod's first CRR.
func checkKruiseTerminator(ctx context.Context, client kubernetes.Interface, rec *reconciler.Reconciler) {
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	list, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{ResourceVersion: "0",
		FieldSelector: fields.OneTermEqualSelector("reason", kruiseTerminatorEventReason).String()})
	if err != nil {
		logger.Info("Could not check whether OpenKruise's SidecarTerminator acts in this cluster", "err", err.Error())
		return
	}
	for _, e := range list.Items {
		if e.InvolvedObject.Kind != "Pod" || e.Reason != kruiseTerminatorEventReason {
			continue
		}
		rec.KruiseTerminatorSeen()
		logger.Info("OpenKruise's own SidecarTerminator acts in this cluster: turn off its feature gate to run one terminator; until then each pod's first ContainerRecreateRequest looks for its CRR first and makes none for the containers that names",
			"pod", klog.KRef(e.InvolvedObject.Namespace, e.InvolvedObject.Name), "message", e.Message)
		return
	}
	logger.V(2).Info("No sign of OpenKruise's own SidecarTerminator in this cluster's events")
}
