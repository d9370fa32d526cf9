package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// registryHosts is containerd's registry host configuration for one
// registry served over plain HTTP on this machine: pull and resolve only.
// containerd reads <config_path>/<host:port>/hosts.toml at each pull
// (containerd remotes/docker/config, HostDirFromRoot), so no restart is
// needed either way.
const registryHosts = `server = "http://{{host}}"

[host."http://{{host}}"]
  capabilities = ["pull", "resolve"]
`

// TrustRegistry makes the node's containerd pull from the registry at host
// (127.0.0.1:PORT, plain HTTP) by writing its hosts.toml under the
// config_path of the node's containerd; the returned func removes it. Only
// loopback registries: the node pulls nothing from elsewhere.
func (n *Node) TrustRegistry(host string) (remove func() error, err error) {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		return nil, fmt.Errorf("registry %q: %w", host, err)
	}
	if ip := net.ParseIP(h); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("registry %q: only a loopback address is trusted", host)
	}
	dir := filepath.Join(n.RunDir, "containerd", "certs.d", host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(render(registryHosts, map[string]string{"host": host})), 0o644); err != nil {
		return nil, err
	}
	return func() error { return os.RemoveAll(dir) }, nil
}

// HasImage reports whether the node's containerd (namespace k8s.io) holds
// an image of repository, under any tag or digest.
func (n *Node) HasImage(ctx context.Context, repository string) (bool, error) {
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.Socket, "--namespace", "k8s.io", "images", "ls", "-q").CombinedOutput()
	if err != nil {
		return false, fmt.Errorf("ctr images ls: %w: %s", err, tail(string(out), 2000))
	}
	for _, ref := range strings.Fields(string(out)) {
		if strings.HasPrefix(ref, repository+":") || strings.HasPrefix(ref, repository+"@") {
			return true, nil
		}
	}
	return false, nil
}
