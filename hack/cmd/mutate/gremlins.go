package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sidecar-terminator/sidecar-terminator/hack/toolbin"
)

// gremlinsOut is the part of gremlins' JSON output read here
// (github.com/go-gremlins/gremlins v0.6.0, internal/report/internal/structure.go).
type gremlinsOut struct {
	Files       []gFile `json:"files"`
	ElapsedTime float64 `json:"elapsed_time"`
}

type gFile struct {
	Filename  string      `json:"file_name"`
	Mutations []gMutation `json:"mutations"`
}

type gMutation struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
}

// gremlins runs it over one package, or reads an earlier run's output.
func gremlins(ctx context.Context, root, pkg string, workers, coef int, from string) (gremlinsOut, error) {
	var g gremlinsOut
	if from != "" {
		return readRuns(from, filepath.Base(pkg))
	}
	bin, err := toolbin.Path(ctx, "gremlins")
	if err != nil {
		return g, err
	}
	tmp, err := os.MkdirTemp("", "mutate")
	if err != nil {
		return g, err
	}
	defer os.RemoveAll(tmp)
	file := filepath.Join(tmp, "out.json")
	// The mutate tag leaves out tests of other packages' work (see
	// controller/decision/trim_skipped_test.go), which only slow each run.
	cmd := exec.CommandContext(ctx, bin, "unleash", "-t", "mutate", "--workers", fmt.Sprint(workers),
		"--timeout-coefficient", fmt.Sprint(coef), "-o", file, "./"+pkg)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	// vet off: a mutant is killed by a failing test, not by vet; no DWARF:
	// faster links, hundreds of them.
	cmd.Env = append(os.Environ(), "GOFLAGS=-vet=off -ldflags=-w")
	fmt.Fprintf(os.Stderr, "== gremlins %s\n", pkg)
	if err := cmd.Run(); err != nil {
		return g, fmt.Errorf("gremlins %s: %w", pkg, err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return g, err
	}
	if err := json.Unmarshal(b, &g); err != nil {
		return g, fmt.Errorf("gremlins output %s: %w", file, err)
	}
	return g, nil
}

// readRuns merges earlier runs over one package, split by file (gremlins -E)
// to run side by side: DIR/<base>*.json, or, for a run that was stopped
// before it wrote its JSON, the mutants its log (DIR/<base>*.log) reports.
func readRuns(dir, base string) (gremlinsOut, error) {
	var all gremlinsOut
	logs, err := filepath.Glob(filepath.Join(dir, base+"*.log"))
	if err != nil {
		return all, err
	}
	for _, l := range logs {
		var g gremlinsOut
		jsonFile := strings.TrimSuffix(l, ".log") + ".json"
		if b, err := os.ReadFile(jsonFile); err == nil {
			if err := json.Unmarshal(b, &g); err != nil {
				return all, fmt.Errorf("%s: %w", jsonFile, err)
			}
		} else if g, err = parseLog(l); err != nil {
			return all, err
		}
		all.Files = append(all.Files, g.Files...)
		all.ElapsedTime += g.ElapsedTime
	}
	if len(all.Files) == 0 {
		return all, fmt.Errorf("no gremlins run for %s in %s", base, dir)
	}
	return all, nil
}

// parseLog reads gremlins' progress lines: "STATUS TYPE at file:line:col".
func parseLog(path string) (gremlinsOut, error) {
	var g gremlinsOut
	b, err := os.ReadFile(path)
	if err != nil {
		return g, err
	}
	byFile := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		status, rest, ok := strings.Cut(strings.TrimSpace(l), " at ")
		if !ok {
			continue
		}
		i := strings.LastIndex(status, " ")
		if i < 0 {
			continue
		}
		st, typ := strings.TrimSpace(status[:i]), status[i+1:]
		parts := strings.Split(rest, ":")
		if len(parts) != 3 {
			continue
		}
		var line, col int
		if _, err := fmt.Sscan(parts[1], &line); err != nil {
			continue
		}
		if _, err := fmt.Sscan(parts[2], &col); err != nil {
			continue
		}
		k, ok := byFile[parts[0]]
		if !ok {
			k = len(g.Files)
			byFile[parts[0]] = k
			g.Files = append(g.Files, gFile{Filename: parts[0]})
		}
		g.Files[k].Mutations = append(g.Files[k].Mutations, gMutation{Type: typ, Status: st, Line: line, Column: col})
	}
	return g, nil
}
