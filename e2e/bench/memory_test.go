package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// The split reads the process's own RSS parts from /proc and the runtime's
// from its metrics: free-but-held is what the heap holds idle and has not
// given back.
func TestTheMemorySplitReadsTheKernelsAndTheRuntimesParts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`go_memstats_heap_alloc_bytes 5e+07
go_memstats_heap_inuse_bytes 6e+07
go_memstats_heap_idle_bytes 4e+07
go_memstats_heap_released_bytes 1e+07
go_memstats_stack_inuse_bytes 2e+06
`))
	}))
	defer srv.Close()
	ctl := &cluster.Controller{MetricsURL: srv.URL, Process: &cluster.Process{PID: os.Getpid()}}
	m := memoryOf(context.Background(), ctl)
	if m.RSSFile <= 0 || m.RSSAnon <= 0 {
		t.Errorf("RSS from the file %d, anonymous %d: want both read from /proc", m.RSSFile, m.RSSAnon)
	}
	if m.HeapLive != 5e7 || m.HeapInUse != 6e7 || m.HeapFree != 3e7 || m.HeapReleased != 1e7 || m.Stacks != 2e6 {
		t.Errorf("the runtime's parts: %+v", m)
	}
	r := threeColumns()
	r.Rounds[0].ControllerMemory = m
	if md := r.Markdown(); !strings.Contains(md, "- round 1, the controller's memory at its burst's end: RSS from the binary's file") ||
		!strings.Contains(md, "free but held 28.6 MiB") || strings.Contains(md, "- round 2, the controller's memory") {
		t.Errorf("the report does not give the split of round 1 alone:\n%s", md)
	}
}
