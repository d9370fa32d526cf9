package app

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"k8s.io/klog/v2"
)

// setMaxProcs runs the controller's goroutines on one OS thread at a time
// unless $GOMAXPROCS says otherwise (then the runtime has already applied
// it). Go's own default is the node's cores, or the container's CPU limit
// rounded up but never under 2 (runtime/cgroup_linux.go,
// adjustCgroupGOMAXPROCS), while the controller uses about a fifth of a
// core in a burst. With two or more Ps the runtime spins threads to hand
// each woken goroutine to an idle P: over a whole 20,000-pod burst paced
// at 50 exits a second that parking and waking was the largest single
// piece of the controller's CPU profile (6.1 of 52.9 s sampled), and at
// GOMAXPROCS=1 the burst cost 2.93 CPU s per 1,000 pods instead of 3.67
// (e2e/bench, docs/measurements.md).
func setMaxProcs(logger klog.Logger) {
	if os.Getenv("GOMAXPROCS") != "" {
		logger.Info("GOMAXPROCS from the environment", "procs", runtime.GOMAXPROCS(0))
		return
	}
	previous := runtime.GOMAXPROCS(DefaultMaxProcs)
	logger.Info("GOMAXPROCS set", "procs", DefaultMaxProcs, "runtimeDefault", previous)
}

// DefaultMaxProcs is GOMAXPROCS when the environment does not set it.
const DefaultMaxProcs = 1

// MemoryLimitEnv names the environment variable the chart fills from the
// container's resources.limits.memory (downward API, in bytes).
const MemoryLimitEnv = "MEMORY_LIMIT"

// cgroupLimitFiles hold the container's memory limit under cgroup v2 and v1.
var cgroupLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// setMemoryLimit gives the Go runtime a soft limit at 90% of the container's
// memory limit, so that the garbage collector works harder before the
// kernel kills the process (a standby taking over would meet the same
// pods). GOMEMLIMIT, when set, is the runtime's own and wins.
func setMemoryLimit(logger klog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		logger.Info("Go memory limit from GOMEMLIMIT", "bytes", debug.SetMemoryLimit(-1))
		return
	}
	limit, source := containerMemoryLimit(os.Getenv(MemoryLimitEnv), cgroupLimitFiles)
	if limit <= 0 {
		logger.Info("No container memory limit found; the Go runtime runs without a memory limit")
		return
	}
	debug.SetMemoryLimit(limit / 10 * 9)
	logger.Info("Go memory limit set", "bytes", limit/10*9, "containerLimit", limit, "from", source)
}

// containerMemoryLimit reads the limit from the environment value, else from
// the first cgroup file that holds a number. 0 means none (cgroup's "max",
// or v1's page-rounded 2^63).
func containerMemoryLimit(env string, files []string) (int64, string) {
	if v, err := strconv.ParseInt(strings.TrimSpace(env), 10, 64); err == nil && v > 0 {
		return v, MemoryLimitEnv
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || v <= 0 || v >= 1<<60 {
			continue
		}
		return v, f
	}
	return 0, ""
}
