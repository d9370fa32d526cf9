package model

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/images/workload/spec"
)

// AnnotationExitCodesPrefix, followed by a container name, scripts the exit
// codes of that container's successive runs ("1,1,0": fail twice, then
// succeed; the last code repeats). The workload argv gives one run; this
// per-object override (kwok's habit) gives a sequence without a new image.
const AnnotationExitCodesPrefix = "model.sidecar-terminator.io/exit-codes."

// Behaviour is what a container's process does once started.
type Behaviour struct {
	// Runs holds the duration and exit code of successive runs; the last
	// repeats. Empty means the process runs until it is signalled.
	Runs []Run
	// IgnoreSIGTERM keeps the process running until SIGKILL at the end of
	// the grace period; otherwise it exits with SIGTERMExitCode.
	IgnoreSIGTERM   bool
	SIGTERMExitCode int32
	// ListenPort: a proxy acknowledging lines on the pod's loopback.
	// DeliverPort: a shipper that, on SIGTERM, delivers its last line to
	// that port and exits 0 if a container of the pod still listens there,
	// spec.ExitLost if not (the workload's --listen and deliver:PORT).
	ListenPort, DeliverPort int
}

// Run is one run of a process that exits on its own.
type Run struct {
	Duration time.Duration
	ExitCode int32
}

// exitOnSIGTERMOfMain is what a shell-like main reports when killed.
const exitOnSIGTERMOfMain = 143

// ParseBehaviour reads what a container does from its argv (the workload
// image's grammar, package spec) and the pod's exit-code script annotation.
// A container whose argv is not the workload's runs until signalled and exits
// 0 on SIGTERM, as most long-running sidecars do. This is the one place that
// reads the grammar, so aligning with it later touches only this function.
func ParseBehaviour(pod *corev1.Pod, c corev1.Container) (Behaviour, error) {
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(argv) == 0 {
		return Behaviour{}, nil
	}
	b, err := spec.Parse(argv)
	if err != nil {
		return Behaviour{}, fmt.Errorf("container %q argv %q: %w", c.Name, argv, err)
	}
	out := Behaviour{IgnoreSIGTERM: b.IgnoreSIGTERM, SIGTERMExitCode: int32(b.SIGTERMExitCode), ListenPort: b.ListenPort, DeliverPort: b.DeliverPort}
	if b.Mode != spec.Main {
		return out, nil
	}
	out.SIGTERMExitCode = exitOnSIGTERMOfMain
	codes := []int32{int32(b.ExitCode)}
	if len(b.ExitCodes) > 0 {
		// Run-counted codes (the workload's --exit-codes): the same sequence.
		codes = codes[:0]
		for _, c := range b.ExitCodes {
			codes = append(codes, int32(c))
		}
	}
	if raw, ok := pod.Annotations[AnnotationExitCodesPrefix+c.Name]; ok {
		if codes, err = parseCodes(raw); err != nil {
			return Behaviour{}, fmt.Errorf("container %q annotation %s: %w", c.Name, AnnotationExitCodesPrefix+c.Name, err)
		}
	}
	for _, code := range codes {
		out.Runs = append(out.Runs, Run{Duration: b.Duration, ExitCode: code})
	}
	return out, nil
}

func parseCodes(raw string) ([]int32, error) {
	var codes []int32
	for _, f := range strings.Split(raw, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n > 255 {
			return nil, fmt.Errorf("exit code %q: want 0..255", f)
		}
		codes = append(codes, int32(n))
	}
	if len(codes) == 0 {
		return nil, fmt.Errorf("no exit codes")
	}
	return codes, nil
}

// run returns the n-th run (0-based) of a process that exits on its own.
func (b Behaviour) run(n int) (Run, bool) {
	if len(b.Runs) == 0 {
		return Run{}, false
	}
	if n >= len(b.Runs) {
		n = len(b.Runs) - 1
	}
	return b.Runs[n], true
}
