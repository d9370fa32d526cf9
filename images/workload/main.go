// Command workload plays a Job's containers on a real node: a main
// container that runs a while and exits with a chosen code, or a sidecar
// that runs until SIGTERM and then exits 0, exits non-zero, or ignores it.
// The grammar is in package spec, shared with the mock virtual node.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/images/workload/spec"
)

func main() {
	b, err := spec.Parse(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "workload: %v\n", err)
		os.Exit(2)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	logf("start %s %q", b.Mode, os.Args[1:])
	if b.Mode == spec.Main {
		select {
		case <-time.After(b.Duration):
			logf("main done after %s, exit %d", b.Duration, b.ExitCode)
			os.Exit(b.ExitCode)
		case s := <-sigs:
			// Killed before finishing: report it like a shell would.
			logf("main got %s before finishing, exit 143", s)
			os.Exit(143)
		}
	}
	for s := range sigs {
		if b.IgnoreSIGTERM {
			logf("sidecar got %s, ignoring it", s)
			continue
		}
		logf("sidecar got %s, exit %d", s, b.SIGTERMExitCode)
		os.Exit(b.SIGTERMExitCode)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stdout, "%s workload: %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}
