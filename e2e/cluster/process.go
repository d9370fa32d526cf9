package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const pollInterval = 100 * time.Millisecond

// Process is one daemon the harness started. Its PID and start time are
// recorded in <run dir>/pids/<name>.pid so that another process (`cluster
// down`) can stop it, and so that a recycled PID is never killed by mistake.
type Process struct {
	Name    string
	PID     int
	LogPath string
	done    chan struct{} // closed when Wait returns, if we are the parent
}

// startProcess starts bin with args, stdout and stderr going to
// <run>/logs/<name>.log. The process gets its own session so that a Ctrl-C
// on the terminal of `cluster up` does not reach it, and it can outlive us.
func startProcess(runDir, name, bin string, args []string, env []string) (*Process, error) {
	logs := filepath.Join(runDir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	logPath := filepath.Join(logs, name+".log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log for %s: %w", name, err)
	}
	defer lf.Close() // the child holds its own copy
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = runDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &Process{Name: name, PID: cmd.Process.Pid, LogPath: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }() // reap, so the PID disappears
	if err := writePIDFile(runDir, p); err != nil {
		_ = p.Stop(time.Second)
		return nil, err
	}
	return p, nil
}

func pidDir(runDir string) string { return filepath.Join(runDir, "pids") }

func writePIDFile(runDir string, p *Process) error {
	st, err := startTime(p.PID)
	if err != nil {
		return fmt.Errorf("read start time of %s: %w", p.Name, err)
	}
	if err := os.MkdirAll(pidDir(runDir), 0o755); err != nil {
		return fmt.Errorf("create pid dir: %w", err)
	}
	data := fmt.Sprintf("%d %s %d\n", p.PID, st, time.Now().UnixNano())
	return os.WriteFile(filepath.Join(pidDir(runDir), p.Name+".pid"), []byte(data), 0o644)
}

// ReadPIDFiles returns the processes recorded in runDir that are still the
// ones we started (same PID and kernel start time), newest first: the order
// in which to stop them.
func ReadPIDFiles(runDir string) ([]*Process, error) {
	entries, err := os.ReadDir(pidDir(runDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pid dir: %w", err)
	}
	type rec struct {
		p       *Process
		started int64
	}
	var recs []rec
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".pid") {
			continue
		}
		path := filepath.Join(pidDir(runDir), e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		var pid int
		var st string
		var at int64
		if _, err := fmt.Sscanf(string(data), "%d %s %d", &pid, &st, &at); err != nil {
			return nil, fmt.Errorf("parse %s: %w", path, err)
		}
		name := strings.TrimSuffix(e.Name(), ".pid")
		if cur, err := startTime(pid); err != nil || cur != st {
			_ = os.Remove(path) // gone, or the PID now belongs to someone else
			continue
		}
		recs = append(recs, rec{&Process{Name: name, PID: pid, LogPath: filepath.Join(runDir, "logs", name+".log")}, at})
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].started > recs[j].started })
	out := make([]*Process, len(recs))
	for i, r := range recs {
		out[i] = r.p
	}
	return out, nil
}

// startTime is field 22 of /proc/PID/stat: with the PID it names a process
// uniquely for the life of the machine.
func startTime(pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')') // comm may contain spaces
	if i < 0 {
		return "", fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return "", fmt.Errorf("short /proc/%d/stat", pid)
	}
	if f[0] == "Z" {
		return "", fmt.Errorf("process %d is a zombie", pid)
	}
	return f[19], nil
}

// Alive reports whether the process still runs.
func (p *Process) Alive() bool {
	if p.done != nil {
		select {
		case <-p.done:
			return false
		default:
			return true
		}
	}
	_, err := startTime(p.PID)
	return err == nil
}

// Stop sends SIGTERM, then SIGKILL after grace, and waits for the process to
// be gone. It removes the PID file.
func (p *Process) Stop(grace time.Duration) error {
	defer func() {
		_ = os.Remove(filepath.Join(filepath.Dir(filepath.Dir(p.LogPath)), "pids", p.Name+".pid"))
	}()
	if !p.Alive() {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	if p.waitGone(grace) {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGKILL)
	if p.waitGone(10 * time.Second) {
		return nil
	}
	return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.Name, p.PID)
}

func (p *Process) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !p.Alive() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return !p.Alive()
}

// LogTail returns the last n bytes of the process log, for error messages.
func (p *Process) LogTail(n int) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return ""
	}
	return tail(string(data), n)
}

// freePort asks the kernel for a free port on 127.0.0.1. Another process may
// take it before our daemon binds it; that shows as a start failure.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func freePorts(n int) ([]int, error) {
	// Hold all listeners until every port is picked, so the n are distinct.
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// waitFor polls cond until it returns true, an error, or ctx/timeout ends.
// proc, if not nil, failing early ends the wait with its log tail.
func waitFor(ctx context.Context, what string, timeout time.Duration, proc *Process, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if proc != nil && !proc.Alive() {
			return fmt.Errorf("%s: %s exited: %s", what, proc.Name, proc.LogTail(3000))
		}
		if err := sleepCtx(ctx, pollInterval); err != nil {
			if proc != nil {
				return fmt.Errorf("%s: timed out (last error: %v); %s log: %s", what, last, proc.Name, proc.LogTail(2000))
			}
			return fmt.Errorf("%s: timed out (last error: %v)", what, last)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// httpOK reports whether GET url answers 200.
func httpOK(ctx context.Context, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}
