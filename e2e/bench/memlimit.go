package bench

import (
	"fmt"
	"os"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/sidecar-terminator/sidecar-terminator/controller/app"
)

// shippedDeployment is the controller's Deployment as shipped (rendered
// from the chart, whose default limit it carries).
const shippedDeployment = "controller/deploy/base/deployment.yaml"

// shippedMemoryLimitEnv is the environment the shipped Deployment gives the
// controller from its container's memory limit (the downward API fills
// MEMORY_LIMIT with it, in bytes), from which the binary sets the Go
// runtime's soft limit (app/memlimit.go). The bench starts the controller as
// a plain process, with no cgroup limit of its own: without this, its
// garbage collector would run as it never does where the controller is
// deployed, and the bench's RSS would not be the shipped defaults'.
func shippedMemoryLimitEnv(root string) (string, error) {
	path := filepath.Join(root, shippedDeployment)
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the shipped Deployment: %w", err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(data, &d); err != nil {
		return "", fmt.Errorf("decode %s: %w", path, err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "controller" {
			continue
		}
		limit, ok := c.Resources.Limits["memory"]
		if !ok {
			return "", fmt.Errorf("%s: the controller container has no memory limit", path)
		}
		return fmt.Sprintf("%s=%d", app.MemoryLimitEnv, limit.Value()), nil
	}
	return "", fmt.Errorf("%s: no container named controller", path)
}
