package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
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
// limiter, and the API server's answers; and where its syncs came from.
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
	// Adds is how many keys were added to the queue (an add of a key
	// already queued is one sync); Events, the informers' events by
	// "kind event result" (result: queued or filtered); Verdicts, the
	// decisions taken by verdict.
	Adds     float64            `json:"adds"`
	Events   map[string]float64 `json:"informerEvents,omitempty"`
	Verdicts map[string]float64 `json:"verdicts,omitempty"`
	// SchedWaits is how many times the controller's goroutines were made
	// runnable (go_sched_latencies_seconds); MeanSchedWait their mean wait
	// before they ran, a lower bound (the runtime's histogram has no exact
	// sum: each wait counts at its bucket's lower edge); SchedWaitP99 the
	// upper edge of the bucket that holds the 99th percentile.
	SchedWaits    float64 `json:"schedWaits,omitempty"`
	MeanSchedWait float64 `json:"meanSchedWaitSecondsAtLeast,omitempty"`
	SchedWaitP99  float64 `json:"schedWaitP99SecondsAtMost,omitempty"`
	// GCCycles is how many garbage collections ran (go_gc_duration_seconds):
	// the burst's CPU includes their marking.
	GCCycles float64 `json:"gcCycles,omitempty"`
}

// breakdownMetrics are summed over their labels.
var breakdownMetrics = []string{
	"workqueue_queue_duration_seconds_sum", "workqueue_queue_duration_seconds_count",
	"workqueue_work_duration_seconds_sum", "workqueue_work_duration_seconds_count",
	"rest_client_rate_limiter_duration_seconds_sum", "rest_client_rate_limiter_duration_seconds_count",
	"rest_client_request_duration_seconds_sum", "rest_client_request_duration_seconds_count",
	"workqueue_adds_total",
	"go_sched_latencies_seconds_sum", "go_sched_latencies_seconds_count",
	"go_gc_duration_seconds_count",
}

// breakdownSeries are kept per series (name{labels}).
var breakdownSeries = []string{"sidecar_terminator_informer_events_total", "sidecar_terminator_decisions_total", schedBucket}

// schedBucket is the runtime's scheduling latencies' cumulative buckets.
const schedBucket = "go_sched_latencies_seconds_bucket"

// snapshot reads the controller's metrics once: the totals of
// breakdownMetrics under their names, and each series of breakdownSeries.
func snapshot(ctx context.Context, ctl *cluster.Controller) (map[string]float64, error) {
	body, err := scrape(ctx, ctl.MetricsURL)
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		series, name := line[:sp], line[:sp]
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		if slices.Contains(breakdownMetrics, name) {
			m[name] += v
		}
		if slices.Contains(breakdownSeries, name) {
			m[series] = v
		}
	}
	return m, nil
}

func scrape(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	return string(body), err
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
		Adds:              d("workqueue_adds_total"),
		Events:            map[string]float64{},
		Verdicts:          map[string]float64{},
	}
	b.MeanQueueWait = mean(b.TotalQueueWaiting, d("workqueue_queue_duration_seconds_count"))
	b.MeanSync = mean(b.TotalSyncTime, b.Syncs)
	b.MeanLimiterWait = mean(b.TotalLimiterWait, d("rest_client_rate_limiter_duration_seconds_count"))
	b.MeanRequest = mean(b.TotalRequestTime, b.Requests)
	b.SchedWaits = d("go_sched_latencies_seconds_count")
	b.MeanSchedWait = mean(d("go_sched_latencies_seconds_sum"), b.SchedWaits)
	b.SchedWaitP99 = bucketQuantile(before, after, schedBucket, 0.99)
	b.GCCycles = d("go_gc_duration_seconds_count")
	for series := range after {
		v := d(series)
		if v == 0 {
			continue
		}
		switch {
		case strings.HasPrefix(series, "sidecar_terminator_informer_events_total{"):
			b.Events[label(series, "kind")+" "+label(series, "event")+" "+label(series, "result")] = v
		case strings.HasPrefix(series, "sidecar_terminator_decisions_total{"):
			b.Verdicts[label(series, "verdict")] = v
		}
	}
	return b
}

// label is one label's value in a series name{a="x",b="y"}.
func label(series, name string) string {
	i := strings.Index(series, name+`="`)
	if i < 0 {
		return ""
	}
	rest := series[i+len(name)+2:]
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return rest
}

func (b Breakdown) String() string {
	return fmt.Sprintf("%.0f syncs from %.0f queue adds (mean %.0f ms queued, %.0f ms syncing); %.0f API requests (mean %.0f ms in the client's QPS limiter, %.0f ms from sending to the answer read); informer events: %s; decisions: %s",
		b.Syncs, b.Adds, b.MeanQueueWait*1000, b.MeanSync*1000, b.Requests, b.MeanLimiterWait*1000, b.MeanRequest*1000,
		counts(b.Events), counts(b.Verdicts)) + b.sched() + fmt.Sprintf("; %.0f GC cycles", b.GCCycles)
}

// sched says how long the controller's goroutines waited for a CPU.
func (b Breakdown) sched() string {
	if b.SchedWaits == 0 {
		return ""
	}
	return fmt.Sprintf("; goroutines made runnable %.0f times, waited to run a mean of at least %.2f ms, p99 at most %.1f ms",
		b.SchedWaits, b.MeanSchedWait*1000, b.SchedWaitP99*1000)
}

// bucketQuantile is the upper edge of the bucket holding the q quantile of
// what a histogram counted between two snapshots (its cumulative bucket
// series name{le="x"}); 0 when it counted nothing.
func bucketQuantile(before, after map[string]float64, bucket string, q float64) float64 {
	type edge struct{ le, n float64 }
	var edges []edge
	for series, v := range after {
		if !strings.HasPrefix(series, bucket+"{") {
			continue
		}
		le, err := strconv.ParseFloat(label(series, "le"), 64)
		if err != nil {
			continue
		}
		edges = append(edges, edge{le, v - before[series]})
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Compare(a.le, b.le) })
	if len(edges) == 0 || edges[len(edges)-1].n <= 0 {
		return 0
	}
	total := edges[len(edges)-1].n // the +Inf bucket: every count
	for _, e := range edges {
		if e.n >= q*total {
			return e.le
		}
	}
	return edges[len(edges)-1].le
}

// counts lists a map's counts by key, in key order.
func counts(m map[string]float64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.0f", k, m[k])
	}
	return strings.Join(parts, ", ")
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
