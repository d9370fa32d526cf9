package kwok

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// TestEveryJobCompletesWithTheController runs 1,000 Jobs on 100 kwok
// nodes through the real scheduler and Job controller with this
// controller: each Job completes only once the controller has swapped its
// sidecar's image. No timing is asserted; a stall of minutes fails it.
func TestEveryJobCompletesWithTheController(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and 100 kwok nodes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := cluster.BuildController(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	const jobs = 1000
	res, err := Run(ctx, Config{Nodes: 100, Jobs: jobs, Terminator: Controller, MainExit: 5 * time.Second, SubmitWorkers: 16,
		Stall: 3 * time.Minute, ControllerBin: bin, Root: root, KeepRunDir: os.Getenv("E2E_LOGS_DIR") != "", Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if res.Complete != jobs || res.Written != jobs {
		t.Fatalf("of %d Jobs, %d had their sidecar swapped and %d completed; want all", jobs, res.Written, res.Complete)
	}
	t.Logf("main exit → Job Complete p50 %.2fs p99 %.2fs; controller's share p50 %.2fs p99 %.2fs; controller peak RSS %s, CPU %.1fs; wall %.0fs",
		res.ExitToComplete.P50, res.ExitToComplete.P99, res.ExitToWrite.P50, res.ExitToWrite.P99, mib(res.TerminatorPeakRSS), res.TerminatorCPU, res.WallSec)
}
