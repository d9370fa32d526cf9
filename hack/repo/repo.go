// Package repo finds the repository's root, so that tests (run in their
// package directory) and commands (run anywhere in the checkout) read and
// build the same sources.
package repo

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Module is the module path of the repository's go.mod.
const Module = "github.com/sidecar-terminator/sidecar-terminator"

// Root returns the directory of the sidecar-terminator go.mod that the
// working directory is in.
func Root() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the sidecar-terminator module")
	}
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	if first, _, _ := bytes.Cut(b, []byte("\n")); strings.TrimSpace(string(first)) != "module "+Module {
		return "", fmt.Errorf("%s is not the sidecar-terminator module", gomod)
	}
	return filepath.Dir(gomod), nil
}
