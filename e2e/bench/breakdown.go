package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// Breakdown says where the controller's time went during a burst, from its
// own metrics (differences across the burst): the workqueue, the client's QPS
// limiter, and the API server's answers.
type Breakdown struct {
	Syncs             float64 `json:"syncs"`
	MeanQueueWait     float64 `json:"meanQueueWaitSeconds"`
	MeanSync          float64 `json:"meanSyncSeconds"`
	Requests          float64 `json:"requests"`
	MeanLimiterWait   float64 `json:"meanLimiterWaitSeconds"`
	MeanRequest       float64 `json:"meanRequestSeconds"`
	TotalLimiterWait  float64 `json:"totalLimiterWaitSeconds"`
	TotalRequestTime  float64 `json:"totalRequestSeconds"`
	TotalSyncTime     float64 `json:"totalSyncSeconds"`
	TotalQueueWaiting float64 `json:"totalQueueWaitSeconds"`
}

// breakdownMetrics are summed over their labels.
var breakdownMetrics = []string{
	"workqueue_queue_duration_seconds_sum", "workqueue_queue_duration_seconds_count",
	"workqueue_work_duration_seconds_sum", "workqueue_work_duration_seconds_count",
	"rest_client_rate_limiter_duration_seconds_sum", "rest_client_rate_limiter_duration_seconds_count",
	"rest_client_request_duration_seconds_sum", "rest_client_request_duration_seconds_count",
}

func snapshot(ctx context.Context, ctl *cluster.Controller) (map[string]float64, error) {
	m := map[string]float64{}
	for _, name := range breakdownMetrics {
		v, err := ctl.MetricTotal(ctx, name)
		if err != nil {
			return nil, err
		}
		m[name] = v
	}
	return m, nil
}

func breakdown(before, after map[string]float64) Breakdown {
	d := func(name string) float64 { return after[name] - before[name] }
	mean := func(sum, count float64) float64 {
		if count == 0 {
			return 0
		}
		return sum / count
	}
	b := Breakdown{
		Syncs:             d("workqueue_work_duration_seconds_count"),
		TotalQueueWaiting: d("workqueue_queue_duration_seconds_sum"),
		TotalSyncTime:     d("workqueue_work_duration_seconds_sum"),
		Requests:          d("rest_client_request_duration_seconds_count"),
		TotalLimiterWait:  d("rest_client_rate_limiter_duration_seconds_sum"),
		TotalRequestTime:  d("rest_client_request_duration_seconds_sum"),
	}
	b.MeanQueueWait = mean(b.TotalQueueWaiting, d("workqueue_queue_duration_seconds_count"))
	b.MeanSync = mean(b.TotalSyncTime, b.Syncs)
	b.MeanLimiterWait = mean(b.TotalLimiterWait, d("rest_client_rate_limiter_duration_seconds_count"))
	b.MeanRequest = mean(b.TotalRequestTime, b.Requests)
	return b
}

func (b Breakdown) String() string {
	return fmt.Sprintf("%.0f syncs (mean %.0f ms queued, %.0f ms syncing); %.0f API requests (mean %.0f ms in the client's QPS limiter, %.0f ms at the API server)",
		b.Syncs, b.MeanQueueWait*1000, b.MeanSync*1000, b.Requests, b.MeanLimiterWait*1000, b.MeanRequest*1000)
}

// waitForEvents counts the controller's SidecarTerminating events until every
// pod of the burst has one or three minutes pass: each action's event must
// reach the API server, not only the action.
func waitForEvents(ctx context.Context, kube kubernetes.Interface, run string, want int, since time.Time) (int, float64) {
	selector := fields.OneTermEqualSelector("reason", reconciler.ReasonTerminated).String()
	seen, lastSeen := 0, time.Time{}
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(2 * time.Second) {
		list, err := kube.CoreV1().Events(Namespace).List(ctx, metav1.ListOptions{FieldSelector: selector, ResourceVersion: "0"})
		if err != nil {
			continue
		}
		pods := map[string]bool{}
		for _, ev := range list.Items {
			if strings.HasPrefix(ev.InvolvedObject.Name, run+"-") {
				pods[ev.InvolvedObject.Name] = true
			}
		}
		if len(pods) > seen {
			seen, lastSeen = len(pods), time.Now()
		}
		if seen >= want {
			break
		}
	}
	if lastSeen.IsZero() {
		return seen, 0
	}
	return seen, lastSeen.Sub(since).Seconds()
}
