package main

import (
	"fmt"
	"os"
	"strings"
)

// argumentFor finds a mutant's argument: "file:line:column TYPE" when two
// mutants of a type share a line, else "file:line TYPE".
func argumentFor(args map[string]string, file string, m gMutation) string {
	if a, ok := args[fmt.Sprintf("%s:%d:%d %s", file, m.Line, m.Column, m.Type)]; ok {
		return a
	}
	return args[fmt.Sprintf("%s:%d %s", file, m.Line, m.Type)]
}

// readArguments reads survivors.txt: "file:line[:column] TYPE: argument" per line.
func readArguments(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		key, arg, ok := strings.Cut(l, ": ")
		if !ok {
			return nil, fmt.Errorf("%s: want \"file:line TYPE: argument\", got %q", path, l)
		}
		out[key] = arg
	}
	return out, nil
}
