package bench

import (
	"context"
	"fmt"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// Memory splits the controller's RSS at a burst's end, which is its peak
// (the Go runtime returns freed pages to the kernel slowly): the pages the
// kernel maps from the binary's file, the anonymous rest, and the Go
// runtime's view of the latter. It says which part a cut must come from.
type Memory struct {
	RSSFile int64 `json:"rssFileBytes"`
	RSSAnon int64 `json:"rssAnonBytes"`
	// HeapLive is the heap's allocated bytes, garbage not yet collected
	// included; HeapInUse its spans in use; HeapFree spans free but still
	// held from the kernel; HeapReleased spans given back; Stacks the
	// goroutines' stacks.
	HeapLive     int64 `json:"heapAllocBytes"`
	HeapInUse    int64 `json:"heapInUseBytes"`
	HeapFree     int64 `json:"heapFreeHeldBytes"`
	HeapReleased int64 `json:"heapReleasedBytes"`
	Stacks       int64 `json:"stackBytes"`
}

// memoryOf reads the controller's memory split; a figure it cannot read is 0.
func memoryOf(ctx context.Context, ctl *cluster.Controller) Memory {
	var m Memory
	m.RSSFile, _ = statusBytes(ctl.Process.PID, "RssFile:")
	m.RSSAnon, _ = statusBytes(ctl.Process.PID, "RssAnon:")
	metric := func(name string) int64 {
		v, _ := ctl.Metric(ctx, name)
		return int64(v)
	}
	m.HeapLive = metric("go_memstats_heap_alloc_bytes")
	m.HeapInUse = metric("go_memstats_heap_inuse_bytes")
	idle := metric("go_memstats_heap_idle_bytes")
	m.HeapReleased = metric("go_memstats_heap_released_bytes")
	m.HeapFree = idle - m.HeapReleased
	m.Stacks = metric("go_memstats_stack_inuse_bytes")
	return m
}

func (m Memory) String() string {
	return fmt.Sprintf("RSS from the binary's file %s, anonymous %s; Go heap allocated %s (spans in use %s, free but held %s, released %s), stacks %s",
		mib(m.RSSFile), mib(m.RSSAnon), mib(m.HeapLive), mib(m.HeapInUse), mib(m.HeapFree), mib(m.HeapReleased), mib(m.Stacks))
}
