package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// nodeProcesses are the processes tied to the node's containerd, stopped
// (newest first) before it; the control plane outlives them.
var nodeProcesses = map[string]bool{KruiseDaemon: true, KubeProxy: true, Kubelet: true, "containerd": true}

func containerdSocket(runDir string) string {
	return filepath.Join(runDir, "node", "hostvarrun", "containerd", "containerd.sock")
}

// StopNodeDir stops the node started in runDir (possibly by another
// process): kruise-daemon and the kubelet, then every pod sandbox through
// CRI, then containerd and any shim left, then unmounts what is mounted in
// the run dir and restores the host state recorded at start.
func StopNodeDir(runDir string) error {
	procs, err := ReadPIDFiles(runDir)
	if err != nil {
		return err
	}
	var errs []error
	sock := containerdSocket(runDir)
	for _, p := range procs {
		if !nodeProcesses[p.Name] {
			continue
		}
		if p.Name == "containerd" {
			if err := removeAllSandboxes(context.Background(), sock); err != nil {
				errs = append(errs, err)
			}
		}
		if err := p.Stop(15 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	for _, pid := range pidsMentioning(sock) {
		// A shim whose sandbox could not be removed: it is ours (its argv
		// names our socket), so end it by PID.
		_ = syscall.Kill(pid, syscall.SIGKILL)
		errs = append(errs, fmt.Errorf("killed leftover shim pid %d", pid))
	}
	if err := unmountUnder(filepath.Join(runDir, "node")); err != nil {
		errs = append(errs, err)
	}
	if h, err := LoadHostState(runDir); err == nil {
		if err := h.Restore(runDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Down stops everything recorded in runDir, node first, undoes the host
// changes, and removes runDir. It works from any process, e.g. `cluster
// down` after `cluster up` exited.
func Down(runDir string) error {
	var errs []error
	if err := StopNodeDir(runDir); err != nil {
		errs = append(errs, err)
	}
	procs, err := ReadPIDFiles(runDir)
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range procs {
		if err := p.Stop(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if left := CheckClean(runDir); len(left) > 0 {
		errs = append(errs, fmt.Errorf("left behind: %s", strings.Join(left, "; ")))
		return errors.Join(errs...) // keep the run dir for the post-mortem
	}
	if err := os.RemoveAll(runDir); err != nil {
		errs = append(errs, fmt.Errorf("remove run dir: %w", err))
	}
	return errors.Join(errs...)
}

// CheckClean lists what a run left behind: live processes from its PID
// files, shims of its containerd, mounts under it, and host
// changes not undone. Empty means clean.
func CheckClean(runDir string) []string {
	var left []string
	if procs, _ := ReadPIDFiles(runDir); len(procs) > 0 {
		for _, p := range procs {
			left = append(left, fmt.Sprintf("process %s pid %d", p.Name, p.PID))
		}
	}
	for _, pid := range pidsMentioning(containerdSocket(runDir)) {
		left = append(left, fmt.Sprintf("process pid %d (a shim of this run's containerd)", pid))
	}
	for _, m := range mountsUnder(runDir) {
		left = append(left, "mount "+m)
	}
	h, err := LoadHostState(runDir)
	if err != nil {
		return left // no node was started from this run dir
	}
	if _, err := os.Stat("/sys/class/net/" + Bridge); err == nil && !h.Existed["/sys/class/net/"+Bridge] {
		left = append(left, "link "+Bridge)
	}
	if t, err := os.Readlink(HostVarRun); err == nil && strings.HasPrefix(t, runDir) {
		left = append(left, "symlink "+HostVarRun)
	}
	for _, cg := range kubepodsCgroups() {
		if !h.Existed[cg] {
			left = append(left, "cgroup "+cg)
		}
	}
	for key, before := range h.Chains {
		bin, table, _ := strings.Cut(key, "/")
		now, _ := iptablesChains(bin, table)
		had := map[string]bool{}
		for _, c := range before {
			had[c] = true
		}
		for _, c := range now {
			if !had[c] && ours(c) {
				left = append(left, fmt.Sprintf("%s chain %s/%s", bin, table, c))
			}
		}
	}
	if fwd, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); strings.TrimSpace(string(fwd)) != h.IPForward {
		left = append(left, "net.ipv4.ip_forward="+strings.TrimSpace(string(fwd))+" (was "+h.IPForward+")")
	}
	for name, was := range h.Sysctls {
		if now, err := readSysctl(name); err == nil && now != was {
			left = append(left, fmt.Sprintf("sysctl %s=%s (was %s)", name, now, was))
		}
	}
	return left
}

// pidsMentioning returns the PIDs whose command line contains s (other than
// this process): how shims, which containerd re-parents to init, are found.
func pidsMentioning(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if strings.Contains(string(cmdline), s) {
			if _, err := startTime(pid); err == nil { // skip zombies
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
