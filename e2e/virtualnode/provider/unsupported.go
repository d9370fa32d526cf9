package provider

import (
	"context"
	"io"

	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The node plays containers without processes: there are no logs to read,
// nothing to exec into and no stats. The suites read container state from
// the API instead. These complete nodeutil.Provider; the node runs no
// kubelet HTTP server, so nothing calls them today.

var errNoProcesses = errdefs.NotFound("the mock virtual node runs no processes")

// GetContainerLogs is not supported.
func (p *Provider) GetContainerLogs(context.Context, string, string, string, api.ContainerLogOpts) (io.ReadCloser, error) {
	return nil, errNoProcesses
}

// RunInContainer is not supported.
func (p *Provider) RunInContainer(context.Context, string, string, string, []string, api.AttachIO) error {
	return errNoProcesses
}

// AttachToContainer is not supported.
func (p *Provider) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return errNoProcesses
}

// GetStatsSummary is not supported.
func (p *Provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return nil, errNoProcesses
}

// GetMetricsResource is not supported.
func (p *Provider) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) {
	return nil, errNoProcesses
}

// PortForward is not supported.
func (p *Provider) PortForward(context.Context, string, string, int32, io.ReadWriteCloser) error {
	return errNoProcesses
}
