package reconciler

import (
	"time"

	"k8s.io/klog/v2"
)

// crrAPIGone tells the Reader that the CRR API answered 404: the CRD was
// removed while the controller ran, and discovery is asked again.
func (r *Reconciler) crrAPIGone(logger klog.Logger) {
	logger.Info("The ContainerRecreateRequest API answered 404: looking for it again")
	r.read.RediscoverCRRAPI()
}

// crrAPIGoneSince keeps when this reconciler first found the CRR API not
// served (decision.Input.CRRAPIGoneSince): a process leads once (it exits
// when it loses the lead), so that is no earlier than the CRD's removal or
// the start of its lead, whichever came last.
func (r *Reconciler) crrAPIGoneSince(served bool, now time.Time) time.Time {
	if served {
		r.crrAPILost.Store(0)
		r.crrAPIServed.Store(now.UnixNano())
		return time.Time{}
	}
	r.crrAPILost.CompareAndSwap(0, now.UnixNano())
	return time.Unix(0, r.crrAPILost.Load())
}

// crrAPIServedAt is when this reconciler last found the CRR API served
// (decision.Input.CRRAPIServedAt); zero if never.
func (r *Reconciler) crrAPIServedAt() time.Time {
	if at := r.crrAPIServed.Load(); at != 0 {
		return time.Unix(0, at)
	}
	return time.Time{}
}
