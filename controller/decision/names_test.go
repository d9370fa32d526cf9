package decision

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
)

func TestNameGenerated(t *testing.T) {
	long := strings.Repeat("a", 70) + "-"
	for _, tc := range []struct {
		desc, generateName, name string
		want                     bool
	}{
		{"Job pod", "report-", "report-x7k2p", true},
		{"bare pod, chosen name", "", "report", false},
		{"chosen name that looks generated", "", "report-x7k2p", false},
		{"generateName set but the name chosen", "report-", "other-x7k2p", false},
		{"suffix too long", "report-", "report-x7k2pq", false},
		{"suffix too short", "report-", "report-x7k2", false},
		{"suffix outside the alphabet (vowels, 0, 1, 3)", "report-", "report-a0e13", false},
		{"suffix uppercase", "report-", "report-X7K2P", false},
		{"long generateName cut to 58", long, long[:58] + "bcdfg", true},
		{"long generateName not cut", long, long + "bcdfg", false},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: tc.generateName, Name: tc.name}}
		if got := NameGenerated(pod); got != tc.want {
			t.Errorf("%s: NameGenerated(generateName=%q, name=%q) = %v, want %v", tc.desc, tc.generateName, tc.name, got, tc.want)
		}
	}
}

// Every name made as the API server's generator makes it (its base cut to 58,
// then utilrand.String(5), k8s.io/apiserver/pkg/storage/names) is recognised.
func TestNameGeneratedAgreesWithTheAPIServer(t *testing.T) {
	for _, base := range []string{"a-", "job-with-a-sidecar-", strings.Repeat("x", 57) + "-", strings.Repeat("y", 80)} {
		for i := 0; i < 200; i++ {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: base, Name: base[:min(len(base), 58)] + utilrand.String(5)}}
			if !NameGenerated(pod) {
				t.Fatalf("generated name %q from %q not recognised", pod.Name, base)
			}
		}
	}
}
