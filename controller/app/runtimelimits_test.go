package app

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"k8s.io/klog/v2"
)

func TestContainerMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v2max, v2 := write("v2max", "max\n"), write("v2", "268435456\n")
	v1none := write("v1none", "9223372036854771712\n")
	missing := filepath.Join(dir, "missing")
	for name, tc := range map[string]struct {
		env   string
		files []string
		want  int64
	}{
		"downward API wins":  {env: "134217728", files: []string{v2}, want: 134217728},
		"cgroup v2":          {files: []string{missing, v2}, want: 268435456},
		"cgroup v2 no limit": {files: []string{v2max}},
		"cgroup v1 no limit": {files: []string{v1none}},
		"bad env, cgroup":    {env: "256Mi", files: []string{v2}, want: 268435456},
		"nothing":            {files: []string{missing}},
	} {
		if got, _ := containerMemoryLimit(tc.env, tc.files); got != tc.want {
			t.Errorf("%s: %d, want %d", name, got, tc.want)
		}
	}
}

func TestTheControllerRunsOnOneProcUnlessTheEnvironmentSaysOtherwise(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(4)
	t.Setenv("GOMAXPROCS", "")
	setMaxProcs(klog.Background())
	if got := runtime.GOMAXPROCS(0); got != DefaultMaxProcs {
		t.Errorf("GOMAXPROCS unset: %d procs, want %d", got, DefaultMaxProcs)
	}
	// The runtime reads $GOMAXPROCS at start; here it stands for a value
	// the runtime applied then, which the controller must keep.
	runtime.GOMAXPROCS(3)
	t.Setenv("GOMAXPROCS", "3")
	setMaxProcs(klog.Background())
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("GOMAXPROCS=3: %d procs, want the environment's 3 kept", got)
	}
}
