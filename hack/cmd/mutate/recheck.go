package main

import (
	"context"
	"fmt"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// copyRepo copies the tracked files to a scratch module, where survivors are
// applied one at a time: the work tree is never changed.
func copyRepo(ctx context.Context, root string) (string, error) {
	dir, err := os.MkdirTemp("", "mutate-sim")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", "git ls-files -z | tar --null -T - -cf - | tar -xf - -C "+dir)
	cmd.Dir, cmd.Stderr = root, os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("copy repository: %w", err)
	}
	return dir, nil
}

// The token each mutant type puts in place of the one found, as gremlins
// v0.6.0 does (internal/engine/mappings.go).
var swaps = map[string]map[token.Token]token.Token{
	"CONDITIONALS_BOUNDARY": {token.GTR: token.GEQ, token.GEQ: token.GTR, token.LSS: token.LEQ, token.LEQ: token.LSS},
	"CONDITIONALS_NEGATION": {token.EQL: token.NEQ, token.NEQ: token.EQL, token.GTR: token.LEQ, token.GEQ: token.LSS, token.LSS: token.GEQ, token.LEQ: token.GTR},
	"ARITHMETIC_BASE":       {token.ADD: token.SUB, token.SUB: token.ADD, token.MUL: token.QUO, token.QUO: token.MUL, token.REM: token.MUL},
	"INCREMENT_DECREMENT":   {token.INC: token.DEC, token.DEC: token.INC},
	"INVERT_NEGATIVES":      {token.SUB: token.ADD},
}

// trySim runs the simulator's tests against the mutant.
func trySim(ctx context.Context, dir string, m Mutant) string {
	return tryTests(ctx, dir, m, 9*time.Minute, "./sim/...")
}

// tryTests applies the mutant in the scratch copy, runs go test with args,
// and puts the file back. A test run past timeout fails, and counts as a
// kill, as gremlins counts TIMED OUT.
func tryTests(ctx context.Context, dir string, m Mutant, timeout time.Duration, args ...string) string {
	path := filepath.Join(dir, m.File)
	src, err := os.ReadFile(path)
	if err != nil {
		return "not tried: " + err.Error()
	}
	mutated, err := applyMutant(src, m)
	if err != nil {
		return "not tried: " + err.Error()
	}
	if err := os.WriteFile(path, mutated, 0o644); err != nil {
		return "not tried: " + err.Error()
	}
	defer os.WriteFile(path, src, 0o644)
	tctx, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(tctx, "go", append([]string{"test", "-count=1", "-failfast", "-timeout", timeout.String()}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-vet=off")
	outb, err := cmd.CombinedOutput()
	switch {
	case err == nil:
		return "lived"
	case strings.Contains(string(outb), "[build failed]"):
		return "not viable"
	default:
		return "killed"
	}
}

func applyMutant(src []byte, m Mutant) ([]byte, error) {
	fset := token.NewFileSet()
	f := fset.AddFile(m.File, -1, len(src))
	var s scanner.Scanner
	s.Init(f, src, nil, 0)
	for {
		pos, tok, _ := s.Scan()
		if tok == token.EOF {
			return nil, fmt.Errorf("no token at %d:%d", m.Line, m.Column)
		}
		p := fset.Position(pos)
		if p.Line != m.Line || p.Column != m.Column {
			continue
		}
		to, ok := swaps[m.Type][tok]
		if !ok {
			return nil, fmt.Errorf("%s at %d:%d is %s, which it does not change", m.Type, m.Line, m.Column, tok)
		}
		off := p.Offset
		out := append([]byte{}, src[:off]...)
		out = append(out, to.String()...)
		return append(out, src[off+len(tok.String()):]...), nil
	}
}
