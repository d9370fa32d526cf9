package reconciler

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// recordAttempts writes the pod's CRR attempt count when the plan asks
// (decision.Plan.RecordAttempts): a kill by CRR failed, and kruise may delete
// that CRR (ttlSecondsAfterFinished, or anyone else) before the retry is
// made, after which nothing would say an attempt was made. Recorded on the
// pod, the count survives the CRR's deletion and a controller restart; the
// happy path never comes here, so it stays one write per pod. A refused
// write is logged and the kill goes on: the count is a bound on retries,
// not a precondition of the kill.
func (r *Reconciler) recordAttempts(ctx context.Context, logger klog.Logger, pod *corev1.Pod, mem *podMemory, plan decision.Plan) {
	mark := plan.RecordAttempts
	if mark == "" || pod.Annotations[decision.AnnotationCRRAttempts] == mark || mem.attemptsRecorded(mark) {
		return
	}
	if err := r.write.AnnotatePod(ctx, pod.Namespace, pod.Name, pod.UID, decision.AnnotationCRRAttempts, mark); err != nil {
		logger.Info("Recording the CRR attempts failed", "attempts", mark, "err", boundedMessage(err.Error()))
		return
	}
	mem.recordedAttempts(mark)
	logger.V(2).Info("Recorded the CRR attempts of a failed kill", "attempts", mark)
}
