package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// mountsUnder lists mount points at or below dir, from /proc/self/mountinfo.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// unescapeMount decodes the octal escapes (\040 for space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder unmounts everything at or below dir, deepest first. The
// kubelet bind-mounts its root dir onto itself (to make it rshared) and
// mounts pod volumes (tmpfs for tokens) below it; containerd mounts
// snapshots and sandbox /dev/shm in its root and state dirs.
func unmountUnder(dir string) error {
	var errs []error
	for range 3 { // a bind mount can be stacked over another; repeat
		mps := mountsUnder(dir)
		if len(mps) == 0 {
			return nil
		}
		sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
		errs = errs[:0]
		for _, mp := range mps {
			if err := syscall.Unmount(mp, 0); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				// Busy: detach it so the directory can still go.
				if err2 := syscall.Unmount(mp, syscall.MNT_DETACH); err2 != nil {
					errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err2))
				}
			}
		}
	}
	if left := mountsUnder(dir); len(left) > 0 {
		errs = append(errs, fmt.Errorf("still mounted under %s: %v", dir, left))
	}
	return errors.Join(errs...)
}
