package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func writeJSON(t *testing.T, file string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func caps(t *testing.T, file string, path ...string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	obj := doc
	for _, k := range path {
		obj = obj[k].(map[string]any)
	}
	out := map[string][]string{}
	for k, v := range obj {
		for _, c := range v.([]any) {
			out[k] = append(out[k], c.(string))
		}
	}
	return out
}

var all = []string{"CAP_CHOWN", "CAP_SYS_RESOURCE", "CAP_SYS_ADMIN"}

func TestCreateDropsTheCapabilityFromEverySetOfTheBundle(t *testing.T) {
	bundle := t.TempDir()
	cfg := filepath.Join(bundle, "config.json")
	writeJSON(t, cfg, map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"args":         []string{"/sbin/init"},
			"capabilities": map[string]any{"bounding": all, "effective": all, "permitted": all, "inheritable": all},
		},
		"root": map[string]any{"path": "rootfs"},
	})
	if err := rewrite([]string{"--root", "/run/x", "--log", "/tmp/l", "create", "--bundle", bundle, "--pid-file", "p", "id"}); err != nil {
		t.Fatal(err)
	}
	got := caps(t, cfg, "process", "capabilities")
	if len(got) != 4 {
		t.Fatalf("sets %v, want 4", got)
	}
	for set, list := range got {
		if slices.Contains(list, "CAP_SYS_RESOURCE") || !slices.Contains(list, "CAP_SYS_ADMIN") || len(list) != 2 {
			t.Errorf("%s = %v, want CAP_CHOWN and CAP_SYS_ADMIN", set, list)
		}
	}
	data, _ := os.ReadFile(cfg)
	var doc map[string]any
	_ = json.Unmarshal(data, &doc)
	if doc["root"].(map[string]any)["path"] != "rootfs" || doc["ociVersion"] != "1.0.2" {
		t.Errorf("other fields changed: %s", data)
	}
}

func TestExecDropsTheCapabilityFromTheProcessFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "process.json")
	writeJSON(t, p, map[string]any{"args": []string{"sh"}, "capabilities": map[string]any{"bounding": all, "ambient": all}})
	if err := rewrite([]string{"--root", "/run/x", "exec", "--process=" + p, "--detach", "id"}); err != nil {
		t.Fatal(err)
	}
	for set, list := range caps(t, p, "capabilities") {
		if slices.Contains(list, "CAP_SYS_RESOURCE") {
			t.Errorf("%s still has it: %v", set, list)
		}
	}
}

func TestBundleDefaultsToTheWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeJSON(t, "config.json", map[string]any{"process": map[string]any{"capabilities": map[string]any{"bounding": all}}})
	if err := rewrite([]string{"run", "id"}); err != nil {
		t.Fatal(err)
	}
	if got := caps(t, "config.json", "process", "capabilities")["bounding"]; slices.Contains(got, "CAP_SYS_RESOURCE") {
		t.Errorf("bounding = %v", got)
	}
}

func TestOtherCommandsReadNoFile(t *testing.T) {
	for _, args := range [][]string{{"state", "id"}, {"--root", "/nonexistent", "delete", "--force", "id"}, {"kill", "id", "9"}, {"--version"}} {
		if err := rewrite(args); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}

func TestMissingBundleIsAnError(t *testing.T) {
	if err := rewrite([]string{"create", "-b", filepath.Join(t.TempDir(), "nope"), "id"}); err == nil {
		t.Error("want an error for a bundle without config.json")
	}
}
