package bench

import (
	"testing"

	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
)

// The bench gives its controller the memory limit the shipped Deployment
// gives it (256Mi), as the downward API would: in bytes, under the name the
// binary reads.
func TestBenchControllerGetsTheShippedMemoryLimit(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	env, err := shippedMemoryLimitEnv(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := "MEMORY_LIMIT=268435456"; env != want {
		t.Errorf("controller environment %q, want %q", env, want)
	}
}
