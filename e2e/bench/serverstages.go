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

// StageTime is how long the API server's requests spent at one stage
// during a burst, from one of its histograms (a difference across the
// burst): how many passed it and their mean time there.
type StageTime struct {
	Name        string  `json:"name"`
	Requests    float64 `json:"requests"`
	MeanSeconds float64 `json:"meanSeconds"`
}

// ServerStages is where the API server's time went during one burst (from
// the creation of its pods to their end, a wider span than the CPU's,
// which starts at the first exit), over every client's requests (the
// bench's own writes among them). The
// controller runs as a service account (Priority and Fairness's
// workload-low level, a bound token, RBAC); the yardstick and the bench's
// own writes as system:masters (exempt, a client certificate): a gap at
// the server between the two is placed by these.
type ServerStages struct {
	// Queued is Priority and Fairness's queue wait, by priority level.
	Queued []StageTime `json:"queued,omitempty"`
	// Executing is from leaving that queue to the answer, by priority level.
	Executing []StageTime `json:"executing,omitempty"`
	// Filters is each handler filter's own time, by filter
	// (authentication, audit, priorityandfairness, authorization).
	Filters []StageTime `json:"filters,omitempty"`
	// Admission is each admission plugin's time, by plugin (reports name
	// those of 0.1 ms or more: serverHistograms).
	Admission []StageTime `json:"admission,omitempty"`
	// Etcd is the time of the server's requests to etcd, by operation.
	Etcd []StageTime `json:"etcd,omitempty"`
}

// serverHistograms are the histograms ServerStages is read from, each
// summed by one label, with how the log (short) and the report (title)
// name the stage, the verb for its time, and the shortest mean a line
// names (most of the 30-odd admission plugins take microseconds).
var serverHistograms = []struct {
	metric, label string
	field         func(*ServerStages) *[]StageTime
	short, title  string
	verb          string
	minMean       float64
}{
	{"apiserver_flowcontrol_request_wait_duration_seconds", "priority_level", func(t *ServerStages) *[]StageTime { return &t.Queued },
		"Priority and Fairness queues", "Priority and Fairness queues (by priority level; the controller is a service account, the yardstick and the bench system:masters)", "queued", 0},
	{"apiserver_flowcontrol_request_execution_seconds", "priority_level", func(t *ServerStages) *[]StageTime { return &t.Executing },
		"executing", "time from Priority and Fairness's queue to the answer (by priority level, every client)", "executing", 0},
	{"apiserver_request_filter_duration_seconds", "filter", func(t *ServerStages) *[]StageTime { return &t.Filters },
		"filters", "handler filters' own time (by filter, every client)", "in the filter", 0},
	{"apiserver_admission_controller_admission_duration_seconds", "name", func(t *ServerStages) *[]StageTime { return &t.Admission },
		"admission", "admission plugins that took 0.1 ms or more (by plugin, every client)", "admitting", 0.0001},
	{"etcd_request_duration_seconds", "operation", func(t *ServerStages) *[]StageTime { return &t.Etcd },
		"etcd", "requests to etcd (by operation, every client)", "at etcd", 0},
}

// histogramSums is metric → label value → {sum, count}.
type histogramSums map[string]map[string][2]float64

// serverSnapshot reads the API server's histograms.
func serverSnapshot(ctx context.Context, kube kubernetes.Interface) (histogramSums, error) {
	body, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the API server's metrics: %w", err)
	}
	return parseHistograms(string(body)), nil
}

func parseHistograms(body string) histogramSums {
	out := histogramSums{}
	for _, line := range strings.Split(body, "\n") {
		for _, h := range serverHistograms {
			var slot int
			switch {
			case strings.HasPrefix(line, h.metric+"_sum{"):
				slot = 0
			case strings.HasPrefix(line, h.metric+"_count{"):
				slot = 1
			default:
				continue
			}
			sp := strings.LastIndexByte(line, ' ')
			v, err := strconv.ParseFloat(line[sp+1:], 64)
			if sp < 0 || err != nil {
				continue
			}
			if out[h.metric] == nil {
				out[h.metric] = map[string][2]float64{}
			}
			key := label(line[:sp], h.label)
			sums := out[h.metric][key]
			sums[slot] += v
			out[h.metric][key] = sums
		}
	}
	return out
}

// stagesBetween is what the server did between two snapshots.
func stagesBetween(before, after histogramSums) ServerStages {
	var t ServerStages
	for _, h := range serverHistograms {
		*h.field(&t) = timesBetween(before[h.metric], after[h.metric])
	}
	return t
}

// timesBetween is each label value's requests and mean time between two
// snapshots of one histogram, for the values that took requests.
func timesBetween(before, after map[string][2]float64) []StageTime {
	var out []StageTime
	for _, name := range slices.Sorted(maps.Keys(after)) {
		n := after[name][1] - before[name][1]
		if n <= 0 {
			continue
		}
		out = append(out, StageTime{Name: name, Requests: n, MeanSeconds: (after[name][0] - before[name][0]) / n})
	}
	return out
}

// slowest keeps the stages whose mean was minMean or more.
func slowest(ts []StageTime, minMean float64) []StageTime {
	var out []StageTime
	for _, t := range ts {
		if t.MeanSeconds >= minMean {
			out = append(out, t)
		}
	}
	return out
}

// formatTimes writes one stage's times: "workload-low 60 requests, mean
// 100.0 ms queued".
func formatTimes(ts []StageTime, what string) string {
	var parts []string
	for _, t := range ts {
		parts = append(parts, fmt.Sprintf("%s %.0f requests, mean %.1f ms %s", t.Name, t.Requests, t.MeanSeconds*1000, what))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// stagesAcross runs burst and gives the server's times across it; a
// snapshot the API server refuses is logged and leaves the times out.
func stagesAcross(ctx context.Context, kube kubernetes.Interface, logf func(string, ...any), burst func() error) (ServerStages, error) {
	before, errBefore := serverSnapshot(ctx, kube)
	if err := burst(); err != nil {
		return ServerStages{}, err
	}
	after, errAfter := serverSnapshot(ctx, kube)
	if errBefore != nil || errAfter != nil {
		logf("the API server's times not read: %v %v", errBefore, errAfter)
		return ServerStages{}, nil
	}
	return stagesBetween(before, after), nil
}

// logServerStages writes a burst's server times to the run's log.
func logServerStages(logf func(string, ...any), run string, t ServerStages) {
	var parts []string
	for _, h := range serverHistograms {
		parts = append(parts, h.short+" "+formatTimes(slowest(*h.field(&t), h.minMean), h.verb))
	}
	logf("%s: the API server during the burst: %s", run, strings.Join(parts, "; "))
}
