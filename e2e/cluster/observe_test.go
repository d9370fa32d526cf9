package cluster

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestServerTimesAreTheAPIServersTimePerKindOfOneUsersRequests(t *testing.T) {
	log := filepath.Join(t.TempDir(), "audit.log")
	lines := `{"stage":"ResponseComplete","verb":"create","user":{"username":"me"},"objectRef":{"resource":"events"},"requestReceivedTimestamp":"2026-11-27T10:00:00.000000Z","stageTimestamp":"2026-11-27T10:00:00.010000Z"}
{"stage":"ResponseComplete","verb":"patch","user":{"username":"me"},"objectRef":{"resource":"pods"},"requestReceivedTimestamp":"2026-11-27T10:00:00.000000Z","stageTimestamp":"2026-11-27T10:00:00.100000Z"}
{"stage":"ResponseComplete","verb":"patch","user":{"username":"me"},"objectRef":{"resource":"pods"},"requestReceivedTimestamp":"2026-11-27T10:00:01.000000Z","stageTimestamp":"2026-11-27T10:00:01.300000Z"}
{"stage":"ResponseComplete","verb":"patch","user":{"username":"someone"},"objectRef":{"resource":"pods"},"requestReceivedTimestamp":"2026-11-27T10:00:00.000000Z","stageTimestamp":"2026-11-27T10:00:09.000000Z"}
{"stage":"ResponseStarted","verb":"create","user":{"username":"me"},"objectRef":{"resource":"events"},"requestReceivedTimestamp":"2026-11-27T10:00:00.000000Z","stageTimestamp":"2026-11-27T10:00:05.000000Z"}
{"stage":"ResponseComplete","verb":"update","user":{"username":"me"},"objectRef":{"resource":"pods","subresource":"status"},"requestReceivedTimestamp":"2026-11-27T10:00:00.000000Z","stageTimestamp":"2026-11-27T10:00:00.050000Z"}
`
	if err := os.WriteFile(log, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ServerTimes(log, "me")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		kind  string
		count int
		mean  time.Duration
	}{
		{"patch pods", 2, 200 * time.Millisecond},
		{"create events", 1, 10 * time.Millisecond},
		{"update pods/status", 1, 50 * time.Millisecond},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %d kinds", got, len(want))
	}
	for i, w := range want {
		if got[i].Kind != w.kind || got[i].Count != w.count || got[i].Mean() != w.mean {
			t.Errorf("kind %d: got %s ×%d, mean %v; want %s ×%d, mean %v", i, got[i].Kind, got[i].Count, got[i].Mean(), w.kind, w.count, w.mean)
		}
	}
}
