//go:build mutate

package decision_test

import (
	"testing"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// Under the mutate tag (make mutate) the trim check is left out: it tests the
// kube layer's trim, which a mutant of the decision changes on both sides
// alike, and without it a mutant's test binary does not link the kube layer
// and client-go, which made each of hundreds of runs several times slower.
func sameAfterTrim(*testing.T, Input, Plan) {}
