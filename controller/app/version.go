package app

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// version is set at build time:
// -ldflags "-X github.com/sidecar-terminator/sidecar-terminator/controller/app.version=v0.1.0"
// (the Makefile's build target and the release do). A build without it says
// "dev".
var version = "dev"

// BuildInfo names the running binary.
type BuildInfo struct {
	Version   string
	Revision  string // the VCS commit Go stamped into the binary, "-dirty" if modified; "unknown" without one
	GoVersion string
}

// Build returns the running binary's BuildInfo.
func Build() BuildInfo {
	b := BuildInfo{Version: version, Revision: "unknown", GoVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		b.Revision = rev
		if modified == "true" {
			b.Revision += "-dirty"
		}
	}
	return b
}

func (b BuildInfo) String() string {
	return b.Version + " (revision " + b.Revision + ", " + b.GoVersion + ")"
}

// processMetrics are the metrics about the process rather than the pods:
// what runs (for alerts that must know the version) and whether it leads
// (exactly one replica should report 1).
type processMetrics struct {
	buildInfo *prometheus.GaugeVec
	leader    prometheus.Gauge
}

func newProcessMetrics(reg prometheus.Registerer, b BuildInfo) *processMetrics {
	m := &processMetrics{
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sidecar_terminator_build_info",
			Help: "Always 1; its labels name the running binary.",
		}, []string{"version", "revision", "go_version"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sidecar_terminator_leader",
			Help: "1 while this replica acts (holds the leader Lease, or runs without leader election), else 0.",
		}),
	}
	m.buildInfo.WithLabelValues(b.Version, b.Revision, b.GoVersion).Set(1)
	reg.MustRegister(m.buildInfo, m.leader)
	return m
}
