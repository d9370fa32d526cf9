package apiserver

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// TestHostilePodsCannotExhaustTheController is the second finding of the
// security review: 100 pods, each with a large value in one of the places
// the controller reads (1 MiB in the image env or the terminate env, 250 KiB
// in the quick-exit or the sidecars annotation). The controller's resident memory
// stays under twice its idle figure, every pod gets its Warning, every
// Warning and log line is bounded.
func TestHostilePodsCannotExhaustTheController(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, true)
	e.createNode(t, ctx, "normal-1", nil)
	e.createNode(t, ctx, "virtual-1", map[string]string{"type": "virtual-kubelet"})
	pid := e.ctl.Process.PID

	// Idle: caches synced, one ordinary pod handled, a moment to settle.
	warm := e.createPod(t, ctx, jobPod("warm-up", "virtual-1", true, envImage))
	e.waitForEvent(t, ctx, warm, "Normal "+reconciler.ReasonTerminated)
	time.Sleep(5 * time.Second)
	idle := procStatusKiB(t, pid, "VmRSS")
	logBefore := fileSize(t, e.ctl.Process.LogPath)

	// Env values of 1 MiB; annotations may hold no more than 256 KiB in all
	// (the API server's limit), so theirs are just under it.
	huge, annotationMax := strings.Repeat("x", 1<<20), strings.Repeat("x", 250<<10)
	kinds := []struct {
		node   string
		reason string
		build  func(p *corev1.Pod)
	}{
		{"virtual-1", decision.ReasonInvalidQuickExitImage, func(p *corev1.Pod) {
			p.Spec.Containers[1].Env = []corev1.EnvVar{{Name: decision.EnvTerminateWithImage, Value: decision.DefaultQuickExitRepository + ":" + huge}}
		}},
		{"normal-1", decision.ReasonInvalidSidecarEnv, func(p *corev1.Pod) {
			p.Spec.Containers[1].Env = []corev1.EnvVar{{Name: decision.EnvTerminate, Value: huge}}
		}},
		{"virtual-1", decision.ReasonInvalidQuickExitImage, func(p *corev1.Pod) {
			p.Annotations = map[string]string{decision.AnnotationSidecars: "sidecar", decision.AnnotationQuickExitImage: annotationMax}
		}},
		{"normal-1", decision.ReasonUnknownSidecarName, func(p *corev1.Pod) {
			p.Annotations = map[string]string{decision.AnnotationSidecars: "sidecar," + annotationMax}
		}},
	}
	const n = 100
	pods := make([]*corev1.Pod, n)
	start := time.Now()
	for i := range pods {
		k := kinds[i%len(kinds)]
		p := jobPod(fmt.Sprintf("hostile-%03d", i), k.node, true)
		k.build(p)
		pods[i] = e.createPod(t, ctx, p)
	}
	t.Logf("created %d pods with 1 MiB values in %s", n, time.Since(start).Round(time.Millisecond))
	for i, p := range pods {
		reason := kinds[i%len(kinds)].reason
		e.waitForEvent(t, ctx, p, "Warning "+reason)
		msg := eventMessage(t, ctx, e, p, reason)
		if len(msg) > decision.MaxMessageLen || strings.Contains(msg, strings.Repeat("x", decision.QuotedPrefixLen+1)) {
			t.Errorf("%s: Warning message of %d bytes, quoting more than a prefix: %.200s", p.Name, len(msg), msg)
		}
	}
	t.Logf("every pod got its Warning %s after the first create", time.Since(start).Round(time.Millisecond))
	peak := procStatusKiB(t, pid, "VmHWM")
	after := procStatusKiB(t, pid, "VmRSS")
	logGrowth := fileSize(t, e.ctl.Process.LogPath) - logBefore
	t.Logf("controller RSS: idle %d KiB, peak over the whole life %d KiB (%.2fx idle), after the run %d KiB; log grew %d bytes (%d per pod)",
		idle, peak, float64(peak)/float64(idle), after, logGrowth, logGrowth/n)
	if peak >= 2*idle {
		t.Errorf("peak RSS %d KiB is not under twice the idle %d KiB", peak, idle)
	}
	if longest := longestLine(t, e.ctl.Process.LogPath); longest > 4*decision.MaxMessageLen {
		t.Errorf("a log line of %d bytes", longest)
	}
	if !e.ctl.Process.Alive() {
		t.Fatalf("controller died:\n%s", e.ctl.LogTail(40))
	}
}

// procStatusKiB reads one "Vm..." field of /proc/PID/status, in KiB.
func procStatusKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func longestLine(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	longest, cur := 0, 0
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return longest
		}
		cur += len(chunk)
		if !isPrefix {
			longest, cur = max(longest, cur), 0
		}
	}
}
