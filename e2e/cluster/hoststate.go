package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// HostState is what the host looked like before the node started, saved in
// <run>/host-state.json so that `cluster down` in another process can undo
// exactly what this run changed and nothing else.
type HostState struct {
	IPForward string `json:"ipForward"`
	// Existed records, for each host path the kubelet, containerd or CNI
	// create on their own (hard-coded paths), whether it was already there.
	Existed map[string]bool `json:"existed"`
	// Chains are the iptables chains per "binary/table" before the run.
	Chains map[string][]string `json:"chains"`
	// Sysctls are the values of hostSysctls before the run; a sysctl the
	// host does not have is absent.
	Sysctls map[string]string `json:"sysctls,omitempty"`
}

// hostSysctls are set by kube-proxy (route_localnet, for NodePorts on
// localhost) or by the harness (route_localnet for APIServerChain;
// bridge-nf-call-iptables, so that a reply from a pod to a pod on the same
// bridge passes the nat table and is translated back from a Service
// address).
var hostSysctls = []string{"net/ipv4/conf/all/route_localnet", "net/bridge/bridge-nf-call-iptables"}

// hostPaths are created by the node's components whatever their config says.
var hostPaths = []string{
	"/sys/class/net/" + Bridge,
	"/var/lib/kubelet", // device-plugins/kubelet.sock is hard-coded
	"/var/log/containers",
	"/var/log/pods",
	"/var/lib/cni", // libcni's result cache
	"/var/run/netns",
	"/run/containerd", // shim sockets under s/ are hard-coded in containerd 1.6
	HostVarRun,
}

// HostVarRun is where kruise-daemon looks for the runtime socket.
const HostVarRun = "/hostvarrun"

var iptablesTables = []string{"filter", "nat", "mangle"}

func hostStatePath(runDir string) string { return filepath.Join(runDir, "host-state.json") }

// RecordHostState snapshots the host, or loads the snapshot of this run dir
// if one exists (a second node start must not record its own leftovers as
// the original state).
func RecordHostState(runDir string) (*HostState, error) {
	if h, err := LoadHostState(runDir); err == nil {
		return h, nil
	}
	fwd, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		return nil, fmt.Errorf("read ip_forward: %w", err)
	}
	h := &HostState{IPForward: strings.TrimSpace(string(fwd)), Existed: map[string]bool{}, Chains: map[string][]string{}}
	for _, p := range append(hostPaths, kubepodsCgroups()...) {
		_, err := os.Lstat(p)
		h.Existed[p] = err == nil
	}
	h.Sysctls = map[string]string{}
	for _, name := range hostSysctls {
		if v, err := readSysctl(name); err == nil {
			h.Sysctls[name] = v
		}
	}
	for _, bin := range []string{"iptables", "ip6tables"} {
		for _, t := range iptablesTables {
			chains, _ := iptablesChains(bin, t) // a missing table is "no chains"
			h.Chains[bin+"/"+t] = chains
		}
	}
	data, _ := json.MarshalIndent(h, "", "  ")
	if err := os.WriteFile(hostStatePath(runDir), data, 0o644); err != nil {
		return nil, fmt.Errorf("save host state: %w", err)
	}
	return h, nil
}

// LoadHostState reads the snapshot saved in runDir.
func LoadHostState(runDir string) (*HostState, error) {
	data, err := os.ReadFile(hostStatePath(runDir))
	if err != nil {
		return nil, err
	}
	var h HostState
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("parse host state: %w", err)
	}
	return &h, nil
}

// kubepodsCgroups are the kubelet's QoS cgroups in every v1 hierarchy and
// in the unified one.
func kubepodsCgroups() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	return dirs
}

func iptablesChains(bin, table string) ([]string, error) {
	out, err := exec.Command(bin+"-save", "-t", table).Output()
	if err != nil {
		return nil, fmt.Errorf("%s-save -t %s: %w", bin, table, err)
	}
	var chains []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, ":") {
			chains = append(chains, strings.Fields(l[1:])[0])
		}
	}
	return chains, nil
}

// ours: chains that the kubelet or kube-proxy (KUBE-*), CNI (CNI-*) or the
// harness (ST-*, APIServerChain) add. Other new chains may belong to
// someone else running on the host at the same time.
func ours(chain string) bool {
	return strings.HasPrefix(chain, "KUBE-") || strings.HasPrefix(chain, "CNI-") || strings.HasPrefix(chain, "ST-")
}

// Restore undoes what the run changed. It must run after every node process
// has stopped. It returns what it could not undo.
func (h *HostState) Restore(runDir string) error {
	var errs []error
	if !h.Existed["/sys/class/net/"+Bridge] {
		if _, err := os.Stat("/sys/class/net/" + Bridge); err == nil {
			if out, err := exec.Command("ip", "link", "del", Bridge).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("delete bridge %s: %w: %s", Bridge, err, out))
			}
		}
	}
	for key, before := range h.Chains {
		bin, table, _ := strings.Cut(key, "/")
		if err := removeNewChains(bin, table, before); err != nil {
			errs = append(errs, err)
		}
	}
	for _, cg := range kubepodsCgroups() {
		if !h.Existed[cg] {
			if err := removeCgroupTree(cg); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if fi, err := os.Lstat(HostVarRun); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		if target, _ := os.Readlink(HostVarRun); strings.HasPrefix(target, runDir) {
			if err := os.Remove(HostVarRun); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", HostVarRun, err))
			}
		}
	}
	for _, p := range hostPaths {
		if h.Existed[p] || strings.HasPrefix(p, "/sys/") || p == HostVarRun {
			continue
		}
		if err := removeUnmounted(p); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte(h.IPForward+"\n"), 0o644); err != nil {
		errs = append(errs, fmt.Errorf("restore ip_forward=%s: %w", h.IPForward, err))
	}
	for name, v := range h.Sysctls {
		if now, err := readSysctl(name); err == nil && now != v {
			if err := writeSysctl(name, v); err != nil {
				errs = append(errs, fmt.Errorf("restore: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// removeNewChains deletes the rules jumping to chains created since the
// snapshot, then the chains themselves.
func removeNewChains(bin, table string, before []string) error {
	now, err := iptablesChains(bin, table)
	if err != nil {
		return nil // table not available: nothing was added to it either
	}
	had := map[string]bool{}
	for _, c := range before {
		had[c] = true
	}
	var added []string
	for _, c := range now {
		if !had[c] && ours(c) {
			added = append(added, c)
		}
	}
	if len(added) == 0 {
		return nil
	}
	isAdded := map[string]bool{}
	for _, c := range added {
		isAdded[c] = true
	}
	out, _ := exec.Command(bin+"-save", "-t", table).Output()
	var errs []error
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "-A" || isAdded[f[1]] {
			continue
		}
		for i := 0; i+1 < len(f); i++ {
			if (f[i] == "-j" || f[i] == "-g") && isAdded[f[i+1]] {
				// A saved rule is valid input for -D once the quoted
				// comments that Fields split are rejoined.
				args := append([]string{"-t", table, "-D"}, unquote(f[1:])...)
				if o, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("%s %v: %w: %s", bin, args, err, o))
				}
				break
			}
		}
	}
	for _, op := range []string{"-F", "-X"} {
		for _, c := range added {
			if o, err := exec.Command(bin, "-t", table, op, c).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("%s -t %s %s %s: %w: %s", bin, table, op, c, err, o))
			}
		}
	}
	return errors.Join(errs...)
}

// unquote rejoins "quoted words" that strings.Fields split apart.
func unquote(f []string) []string {
	var out []string
	for i := 0; i < len(f); i++ {
		s := f[i]
		if strings.HasPrefix(s, `"`) {
			for !strings.HasSuffix(s, `"`) || len(s) == 1 {
				if i+1 >= len(f) {
					break
				}
				i++
				s += " " + f[i]
			}
			s = strings.Trim(s, `"`)
		}
		out = append(out, s)
	}
	return out
}

// removeCgroupTree removes a cgroup directory tree bottom-up; cgroupfs only
// allows rmdir of empty groups, and files inside are virtual.
func removeCgroupTree(root string) error {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var errs []error
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// removeUnmounted removes p unless something is still mounted under it
// (RemoveAll would then delete through the mount).
func removeUnmounted(p string) error {
	if _, err := os.Lstat(p); err != nil {
		return nil
	}
	if m := mountsUnder(p); len(m) > 0 {
		return fmt.Errorf("not removing %s: still mounted: %v", p, m)
	}
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	return nil
}
