package bench

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// The scenario's audit reading maps a CRR back to its pod by the name the
// controller gives it, refused or created.
func TestCRRPodFromName(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "chaos-x7k2p", UID: "3f1c9a2e-0000-4000-8000-000000000001"}}
	for attempt := 1; attempt <= 3; attempt++ {
		if got := crrPod(decision.CRRName(pod, attempt)); got != pod.Name {
			t.Errorf("crrPod(%s) = %s, want %s", decision.CRRName(pod, attempt), got, pod.Name)
		}
	}
}

// The retry-storm bound follows the backoff: 5 s doubling sends at 0, 5, 15
// and 35 s, so a 20 s outage sees three creates (and one in flight).
func TestOutageBound(t *testing.T) {
	for _, tc := range []struct {
		outage time.Duration
		want   int
	}{{time.Second, 2}, {5 * time.Second, 3}, {20 * time.Second, 4}, {35 * time.Second, 5}} {
		if got := outageBound(tc.outage, 5*time.Second); got != tc.want {
			t.Errorf("outageBound(%s) = %d, want %d", tc.outage, got, tc.want)
		}
	}
}
