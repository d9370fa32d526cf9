package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/images"
)

// PauseImage is the sandbox image containerd is told to use. It must be
// imported before the first pod (images/pause builds it); containerd would
// otherwise try to pull it from the network.
var PauseImage = images.Pause.Ref

// containerdConfig keeps every path containerd would otherwise put on the
// host (/var/lib/containerd, /run/containerd, /opt/containerd) in the run dir.
// The settings marked "required" are measured necessities on this host (see
// shared/notes/local-cluster.md).
const containerdConfig = `version = 2
root = "{{run}}/containerd/root"
state = "{{run}}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.internal.v1.tracing"]

[grpc]
  # kruise-daemon finds the runtime only under /hostvarrun; {{sockdir}} is
  # what /hostvarrun points to.
  address = "{{sock}}"

[ttrpc]
  address = "{{sock}}.ttrpc"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{{run}}/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{pause}}"
  # required: root here cannot set oom_score_adj -998.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".registry]
    # One hosts.toml per registry a run trusts (Node.TrustRegistry); empty
    # otherwise, and nothing is pulled.
    config_path = "{{run}}/containerd/certs.d"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{{run}}/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # required: no systemd here; the kubelet uses cgroupfs too.
        SystemdCgroup = false
        Root = "{{run}}/runc"
`

// cniConfig is a bridge network on a private subnet. host-local keeps its
// leases in the run dir; no masquerading, since pods talk only to the node.
const cniConfig = `{
  "cniVersion": "0.4.0",
  "name": "st-bridge",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "{{bridge}}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "{{run}}/cni/ipam",
        "ranges": [[{"subnet": "{{subnet}}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "loopback"}
  ]
}
`

// Bridge is the CNI bridge's name; the harness deletes it at Stop.
const Bridge = "cni0"

func render(tmpl string, vars map[string]string) string {
	for k, v := range vars {
		tmpl = strings.ReplaceAll(tmpl, "{{"+k+"}}", v)
	}
	return tmpl
}

// startContainerd writes the config and CNI conflist and starts containerd
// with its socket at <run>/hostvarrun/containerd/containerd.sock.
func (n *Node) startContainerd(ctx context.Context, subnet string) error {
	run := n.RunDir
	n.Socket = filepath.Join(run, "hostvarrun", "containerd", "containerd.sock")
	for _, d := range []string{filepath.Dir(n.Socket), filepath.Join(run, "cni", "net.d"), filepath.Join(run, "containerd")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	vars := map[string]string{"run": run, "sock": n.Socket, "sockdir": filepath.Dir(filepath.Dir(n.Socket)),
		"pause": PauseImage, "bridge": Bridge, "subnet": subnet}
	cfg := filepath.Join(run, "containerd", "config.toml")
	if err := os.WriteFile(cfg, []byte(render(containerdConfig, vars)), 0o644); err != nil {
		return fmt.Errorf("write containerd config: %w", err)
	}
	conflist := filepath.Join(run, "cni", "net.d", "10-st-bridge.conflist")
	if err := os.WriteFile(conflist, []byte(render(cniConfig, vars)), 0o644); err != nil {
		return fmt.Errorf("write CNI config: %w", err)
	}
	bin, err := exec.LookPath("containerd")
	if err != nil {
		return fmt.Errorf("containerd not installed (run e2e/hack/install-host-deps.sh): %w", err)
	}
	p, err := startProcess(n.cp.RunDir, "containerd", bin, []string{"--config", cfg, "--log-level", "warn"}, nil)
	if err != nil {
		return err
	}
	n.procs = append(n.procs, p)
	return waitFor(ctx, "containerd socket", 30*time.Second, p, func(ctx context.Context) (bool, error) {
		err := n.ctr(ctx, "version")
		return err == nil, err
	})
}

// ctr runs `ctr -n k8s.io` against this node's containerd.
func (n *Node) ctr(ctx context.Context, args ...string) error {
	full := append([]string{"--address", n.Socket, "--namespace", "k8s.io"}, args...)
	out, err := exec.CommandContext(ctx, "ctr", full...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, tail(string(out), 2000))
	}
	return nil
}

// ImportImages imports OCI/Docker image tarballs into the node's containerd
// (namespace k8s.io, the one the CRI plugin reads).
func (n *Node) ImportImages(ctx context.Context, tarballs ...string) error {
	for _, t := range tarballs {
		// --no-unpack would leave unpacking to the first pod; unpack now so
		// the first pod's start time is not inflated.
		if err := n.ctr(ctx, "images", "import", "--snapshotter", "overlayfs", t); err != nil {
			return fmt.Errorf("import %s: %w", t, err)
		}
	}
	return nil
}
