package bench

import (
	"os"
	"testing"
	"time"
)

func TestTheControlPlanesCPUIsCountedFromTheBurstsStart(t *testing.T) {
	// A PID above the kernel's pid_max (2^22 at most) is never a process.
	pids := map[string]int{"self": os.Getpid(), "gone": 1<<22 + 1}
	before := cpuOf(pids)
	if _, ok := before["gone"]; ok || len(before) != 1 {
		t.Fatalf("before = %v, want only self", before)
	}
	// Spin until the kernel has counted at least two ticks of CPU.
	for start := time.Now(); time.Since(start) < 10*time.Second; {
		if s, _ := cpuSeconds(os.Getpid()); s >= before["self"]+2.0/clockTicks {
			break
		}
	}
	// Tick counts divided by 100 differ by a hair from 0.02 when subtracted.
	since := cpuSince(pids, before)
	if since["self"] < 1.5/clockTicks || len(since) != 1 {
		t.Errorf("since = %v, want self's two ticks or more and nothing else", since)
	}
	// A count that went back is another process under the PID: left out.
	if got := cpuSince(pids, map[string]float64{"self": 1e9}); len(got) != 0 {
		t.Errorf("a count that went back gave %v, want nothing", got)
	}
}

func TestTheMachinesBusyTimeGrowsWhileACoreWorks(t *testing.T) {
	before, err := machineBusySeconds()
	if err != nil {
		t.Fatal(err)
	}
	self, _ := cpuSeconds(os.Getpid())
	const spent = 20.0 // ticks of this process's CPU
	for start := time.Now(); time.Since(start) < 10*time.Second; {
		if s, _ := cpuSeconds(os.Getpid()); s >= self+spent/clockTicks {
			break
		}
	}
	// This process alone spent 20 ticks: the machine at least about as
	// many. The two are counted differently: a process's time is its
	// measured run time, the machine's the ticks that found a CPU busy,
	// so the machine's may be short by a tick or more at each end of the
	// spin (one run counted 4 ticks against 5; 15 allows for that).
	if after, _ := machineBusySeconds(); after-before < 15.0/clockTicks {
		t.Errorf("the machine's busy time grew %.2f s while this process spent %.2f s", after-before, spent/clockTicks)
	}
}
