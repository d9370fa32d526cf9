package kwok

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// procStat is what /proc says of one process: its peak and current
// resident set (VmHWM, VmRSS) and its CPU time so far.
type procStat struct {
	PeakRSS, RSS int64
	CPUSeconds   float64
}

// clockTicks is USER_HZ, 100 on Linux for every architecture Go supports.
const clockTicks = 100

func readProc(pid int) (procStat, error) {
	var s procStat
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmHWM:":
			s.PeakRSS = kb * 1024
		case "VmRSS:":
			s.RSS = kb * 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces; utime and stime are the 14th and 15th of the line.
	str := string(stat)
	f := strings.Fields(str[strings.LastIndexByte(str, ')')+2:])
	if len(f) < 13 {
		return s, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	s.CPUSeconds = (ut + st) / clockTicks
	return s, nil
}

// loadAverage is /proc/loadavg's first three fields: how busy the shared
// machine was.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
