// Command kindimage builds kind node images with no image registry: the
// base image from a Debian root (debootstrap) plus kind's own images/base
// files from the pinned sigs.k8s.io/kind module, and the node image with
// `kind build node-image --type file` from a Kubernetes server tarball made
// here from Go modules (the local cluster's Kubernetes build, kubeadm,
// etcd, CoreDNS, the local-path provisioner, the project's pause and a
// small kindnetd stand-in, kind/cmd/kindnetd). Everything is cached by
// version: the Go binaries under SIDECAR_TERMINATOR_CACHE, the Debian root
// as a tarball there, the images in the Docker engine's data root
// (kind/hack/dockerd.sh keeps it in the cache too). Prints the node image.
//
//	SIDECAR_TERMINATOR_KUBERNETES=1.37 DOCKER_HOST=unix://... go run ./kind/cmd/kindimage
//
// One architecture: the machine's. Needs root (debootstrap), Docker.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/hack/repo"
	"github.com/sidecar-terminator/sidecar-terminator/hack/toolbin"
)

// recipe names this builder's output: bump it when what goes into an image
// changes, so cached images of the old recipe are not reused.
const recipe = "r1"

func main() {
	printName := flag.Bool("print-name", false, "print the node image name for this Kubernetes version and kind, build nothing")
	out := flag.String("out", "bin/kind/kruise-image.tar", "kruise-image: where to write the tarball")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: kindimage [-print-name]        the node image (built unless cached); prints its name")
		fmt.Fprintln(os.Stderr, "       kindimage [-out F] kruise-image OpenKruise's image as a docker-archive; prints its name")
		fmt.Fprintln(os.Stderr, "       kindimage kruise-dir            the pinned kruise module's directory (its config/)")
	}
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := newBuilder(ctx)
	if err == nil && flag.NArg() > 0 {
		switch flag.Arg(0) {
		case "kruise-image":
			if err = b.kruiseImage(ctx, *out); err == nil {
				fmt.Println(KruiseImage)
			}
		case "kruise-dir":
			var dir string
			if dir, err = b.kruiseDir(ctx); err == nil {
				fmt.Println(dir)
			}
		default:
			flag.Usage()
			os.Exit(2)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "kindimage: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err == nil && *printName {
		fmt.Println(b.nodeRef())
		return
	}
	if err == nil {
		var ref string
		if ref, err = b.nodeImage(ctx); err == nil {
			fmt.Println(ref)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kindimage: %v\n", err)
		os.Exit(1)
	}
}

type builder struct {
	root        string // repository root
	cache       string // SIDECAR_TERMINATOR_CACHE/kind
	kindVersion string
	kindDir     string // the sigs.k8s.io/kind module in the module cache
	docker      string
}

func newBuilder(ctx context.Context) (*builder, error) {
	root, err := repo.Root()
	if err != nil {
		return nil, err
	}
	cache, err := cluster.CacheDir()
	if err != nil {
		return nil, err
	}
	gomod, err := os.ReadFile(filepath.Join(root, "hack/tools/kind/go.mod"))
	if err != nil {
		return nil, err
	}
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?sigs\.k8s\.io/kind (v\S+)`).FindSubmatch(gomod)
	if m == nil {
		return nil, fmt.Errorf("hack/tools/kind/go.mod does not require sigs.k8s.io/kind")
	}
	b := &builder{root: root, cache: filepath.Join(cache, "kind"), kindVersion: string(m[1]), docker: "docker"}
	if _, err := os.Stat("/usr/bin/docker"); err == nil {
		b.docker = "/usr/bin/docker" // Debian's, the engine's own version
	}
	out, err := b.output(ctx, "", "go", "mod", "download", "-json", "sigs.k8s.io/kind@"+b.kindVersion)
	if err != nil {
		return nil, err
	}
	dm := regexp.MustCompile(`"Dir":\s*"([^"]+)"`).FindStringSubmatch(out)
	if dm == nil {
		return nil, fmt.Errorf("go mod download sigs.k8s.io/kind@%s: no Dir in %s", b.kindVersion, out)
	}
	b.kindDir = dm[1]
	return b, os.MkdirAll(b.cache, 0o755)
}

func (b *builder) baseRef() string {
	return fmt.Sprintf("sidecar-terminator.local/kind-base:%s-%s", b.kindVersion, recipe)
}

func (b *builder) nodeRef() string {
	return fmt.Sprintf("sidecar-terminator.local/kind-node:%s-kind-%s-%s", cluster.KubernetesVersion, b.kindVersion, recipe)
}

// nodeImage builds the node image unless the engine has it.
func (b *builder) nodeImage(ctx context.Context) (string, error) {
	ref := b.nodeRef()
	if b.hasImage(ctx, ref) {
		fmt.Fprintf(os.Stderr, "kindimage: %s cached\n", ref)
		return ref, nil
	}
	t0 := time.Now()
	rootfs, err := b.rootfs(ctx)
	if err != nil {
		return "", err
	}
	if err := b.baseImage(ctx, rootfs); err != nil {
		return "", err
	}
	tarball, err := b.serverTarball(ctx, rootfs)
	if err != nil {
		return "", err
	}
	kind, err := toolbin.Path(ctx, "kind")
	if err != nil {
		return "", err
	}
	step := time.Now()
	if _, err := b.run(ctx, "", kind, "build", "node-image", "--type", "file", tarball, "--base-image", b.baseRef(), "--image", ref); err != nil {
		return "", err
	}
	b.timed("kind build node-image", step)
	b.timed("node image "+ref, t0)
	return ref, nil
}

func (b *builder) hasImage(ctx context.Context, ref string) bool {
	return exec.CommandContext(ctx, b.docker, "image", "inspect", ref).Run() == nil
}

func (b *builder) timed(what string, since time.Time) {
	fmt.Fprintf(os.Stderr, "kindimage: %s in %s\n", what, time.Since(since).Round(time.Second))
}

// run runs a command, its output to stderr, failing with its tail.
func (b *builder) run(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if err != nil {
		s := out.String()
		if len(s) > 3000 {
			s = "..." + s[len(s)-3000:]
		}
		return "", fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, s)
	}
	return out.String(), nil
}

// output runs a command and returns its standard output.
func (b *builder) output(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if dir == "" {
		cmd.Dir = os.TempDir()
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// runEnv is run with extra environment.
func (b *builder) runEnv(ctx context.Context, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		s := out.String()
		if len(s) > 3000 {
			s = "..." + s[len(s)-3000:]
		}
		return "", fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, s)
	}
	return out.String(), nil
}
