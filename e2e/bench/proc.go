package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, 100 on Linux for every architecture Go supports.
const clockTicks = 100

// rssBytes reads a process's resident set size from /proc.
func rssBytes(pid int) (int64, error) { return statusBytes(pid, "VmRSS:") }

// rssPeakBytes reads the highest resident set size the process has had
// since it started (the kernel's high-water mark): the bench starts each
// terminator afresh for its burst, so this is the burst's peak, or the
// initial list's if that was higher.
func rssPeakBytes(pid int) (int64, error) { return statusBytes(pid, "VmHWM:") }

// statusBytes reads one kB field of /proc/PID/status.
func statusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no %s for pid %d", field, pid)
}

// cpuSeconds reads a process's user+system CPU time from /proc.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return (utime + stime) / clockTicks, nil
}

// machineBusySeconds is the time every core of the machine together has
// spent busy since boot (neither idle nor waiting for I/O), from the first
// line of /proc/stat: user, nice, system, idle, iowait, irq, softirq, steal
// (guest time is counted in user already).
func machineBusySeconds() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: no cpu line")
	}
	var busy float64
	for i, v := range f[1:9] {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy / clockTicks, nil
}

// cpuOf reads each process's CPU seconds, by name; one it cannot read is
// left out.
func cpuOf(pids map[string]int) map[string]float64 {
	if len(pids) == 0 {
		return nil
	}
	out := make(map[string]float64, len(pids))
	for name, pid := range pids {
		if s, err := cpuSeconds(pid); err == nil {
			out[name] = s
		}
	}
	return out
}

// cpuSince is the CPU each process has used since before was read (cpuOf);
// a process that cannot be read now, or whose count went back (another
// process under its PID), is left out.
func cpuSince(pids map[string]int, before map[string]float64) map[string]float64 {
	now := cpuOf(pids)
	var out map[string]float64
	for name, s0 := range before {
		if s1, ok := now[name]; ok && s1 >= s0 {
			if out == nil {
				out = map[string]float64{}
			}
			out[name] = s1 - s0
		}
	}
	return out
}
