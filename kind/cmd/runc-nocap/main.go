// Command runc-nocap is a runc wrapper for Docker engines run by a root that
// lacks CAP_SYS_RESOURCE (as in some CI sandboxes). Docker gives a
// privileged container, as kind runs every node, all capabilities, and runc
// then fails with "unable to apply caps: operation not permitted". The
// wrapper removes CAP_SYS_RESOURCE from the OCI bundle's config.json (runc
// create/run) or from the process file (runc exec --process), then execs
// the real runc with the same arguments. kind/hack/dockerd.sh registers it
// as its dockerd's default runtime.
//
//	dockerd --add-runtime nocap=/path/runc-nocap --default-runtime nocap
//
// The real runc is RUNC_NOCAP_RUNC, or runc in PATH.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// dropped is the capability root here cannot hand to a container.
const dropped = "CAP_SYS_RESOURCE"

func main() {
	if err := rewrite(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "runc-nocap: %v\n", err)
		os.Exit(1)
	}
	runc := os.Getenv("RUNC_NOCAP_RUNC")
	if runc == "" {
		var err error
		if runc, err = findRunc(); err != nil {
			fmt.Fprintf(os.Stderr, "runc-nocap: %v\n", err)
			os.Exit(1)
		}
	}
	err := syscall.Exec(runc, append([]string{"runc"}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "runc-nocap: exec %s: %v\n", runc, err)
	os.Exit(1)
}

// findRunc finds runc in PATH, skipping this wrapper itself.
func findRunc() (string, error) {
	self, _ := os.Executable()
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(dir, "runc")
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 && p != self {
			return p, nil
		}
	}
	return "", fmt.Errorf("runc not found in PATH")
}

// rewrite edits the file runc will read for these arguments, if any.
func rewrite(args []string) error {
	cmd, rest := subcommand(args)
	switch cmd {
	case "create", "run":
		bundle := flagValue(rest, "--bundle", "-b")
		if bundle == "" {
			bundle = "." // runc's default: the working directory
		}
		return dropFrom(filepath.Join(bundle, "config.json"), "process", "capabilities")
	case "exec":
		if p := flagValue(rest, "--process", "-p"); p != "" {
			return dropFrom(p, "capabilities")
		}
	}
	return nil
}

// globalWithValue are runc's global flags that take a separate value.
var globalWithValue = map[string]bool{"--root": true, "--log": true, "--log-format": true, "--criu": true, "--rootless": true}

// subcommand returns runc's subcommand and the arguments after it.
func subcommand(args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return a, args[i+1:]
		}
		if globalWithValue[a] {
			i++
		}
	}
	return "", nil
}

// flagValue returns the value of the first of names in args (--x v, --x=v, -x v).
func flagValue(args []string, names ...string) string {
	for i, a := range args {
		for _, n := range names {
			if a == n && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, n+"="); ok {
				return v
			}
		}
	}
	return ""
}

// dropFrom removes the capability from every set of the capabilities object
// found at path (keys into the JSON document), keeping everything else.
func dropFrom(file string, path ...string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	out, changed := drop(doc, path)
	if !changed {
		return nil
	}
	st, err := os.Stat(file)
	if err != nil {
		return err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, st.Mode().Perm())
}

// drop walks path in doc and filters the capability out of each list of
// the object there (bounding, effective, inheritable, permitted, ambient).
func drop(doc map[string]any, path []string) (map[string]any, bool) {
	obj := doc
	for _, k := range path {
		next, ok := obj[k].(map[string]any)
		if !ok {
			return doc, false
		}
		obj = next
	}
	changed := false
	for set, v := range obj {
		list, ok := v.([]any)
		if !ok {
			continue
		}
		kept := list[:0:0]
		for _, c := range list {
			if c == dropped {
				changed = true
				continue
			}
			kept = append(kept, c)
		}
		obj[set] = kept
	}
	return doc, changed
}
