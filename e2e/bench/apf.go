package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// APFWait is how long the API server's Priority and Fairness held the
// requests of one priority level in its queues during a burst (its
// apiserver_flowcontrol_request_wait_duration_seconds, a difference across
// the burst). The controller runs as a service account (the workload-low
// level); the yardstick and the bench's own writes as system:masters
// (exempt, never queued): a gap at the server between the two is told
// apart from a wait in these queues by it.
type APFWait struct {
	Level           string  `json:"priorityLevel"`
	Requests        float64 `json:"requests"`
	MeanWaitSeconds float64 `json:"meanWaitSeconds"`
}

const apfWaitMetric = "apiserver_flowcontrol_request_wait_duration_seconds"

// apfSnapshot reads the API server's queue waits, summed per priority
// level: level → {sum, count}.
func apfSnapshot(ctx context.Context, kube kubernetes.Interface) (map[string][2]float64, error) {
	body, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the API server's metrics: %w", err)
	}
	return parseAPFWaits(string(body)), nil
}

func parseAPFWaits(body string) map[string][2]float64 {
	out := map[string][2]float64{}
	for _, line := range strings.Split(body, "\n") {
		var slot int
		switch {
		case strings.HasPrefix(line, apfWaitMetric+"_sum{"):
			slot = 0
		case strings.HasPrefix(line, apfWaitMetric+"_count{"):
			slot = 1
		default:
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if sp < 0 || err != nil {
			continue
		}
		level := label(line[:sp], "priority_level")
		sums := out[level]
		sums[slot] += v
		out[level] = sums
	}
	return out
}

// apfWaits are the waits between two snapshots, by priority level, for
// the levels that took requests.
func apfWaits(before, after map[string][2]float64) []APFWait {
	var out []APFWait
	for _, level := range slices.Sorted(maps.Keys(after)) {
		n := after[level][1] - before[level][1]
		if n <= 0 {
			continue
		}
		out = append(out, APFWait{Level: level, Requests: n, MeanWaitSeconds: (after[level][0] - before[level][0]) / n})
	}
	return out
}

func formatAPFWaits(ws []APFWait) string {
	var parts []string
	for _, w := range ws {
		parts = append(parts, fmt.Sprintf("%s %.0f requests, mean %.1f ms queued", w.Level, w.Requests, w.MeanWaitSeconds*1000))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// apfAcross runs burst and gives the queue waits across it; a snapshot the
// API server refuses is logged and leaves the waits out.
func apfAcross(ctx context.Context, kube kubernetes.Interface, logf func(string, ...any), burst func() error) ([]APFWait, error) {
	before, errBefore := apfSnapshot(ctx, kube)
	if err := burst(); err != nil {
		return nil, err
	}
	after, errAfter := apfSnapshot(ctx, kube)
	if errBefore != nil || errAfter != nil {
		logf("Priority and Fairness waits not read: %v %v", errBefore, errAfter)
		return nil, nil
	}
	return apfWaits(before, after), nil
}
