package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/images"
	"github.com/sidecar-terminator/sidecar-terminator/images/oci"
)

// componentImage is the Debian root (glibc for the cgo-linked binaries;
// iptables and nft for kube-proxy and the kindnetd stand-in) plus one binary.
func componentImage(root v1.Layer, binary, at string, entrypoint []string) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := filepath.Dir(strings.TrimPrefix(at, "/"))
	if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
		return nil, err
	}
	if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(at, "/"), Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	bin, err := tarball.LayerFromOpener(func() (ioReadCloser, error) { return nopCloser{bytes.NewReader(raw)}, nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, root, bin)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = entrypoint
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return mutate.ConfigFile(img, cf)
}

// serverTarball writes a Kubernetes server tarball as `kind build
// node-image --type file` reads it (kubernetes/version,
// kubernetes/server/bin/{kubeadm,kubelet,kubectl} and four image archives)
// unless cached. kube-proxy.tar also carries every other image kind wants
// on a node (kubeadm's etcd and CoreDNS, containerd's sandbox image, kind's
// CNI and storage images), so that none is pulled.
func (b *builder) serverTarball(ctx context.Context, rootfs string) (string, error) {
	// Gzipped: kind v0.33.0 reads the file through gzip.NewReader
	// (pkg/build/nodeimage/internal/kube/tar.go, extractTarball).
	path := filepath.Join(b.cache, fmt.Sprintf("kubernetes-server-%s-kind-%s-%s.tar.gz", cluster.KubernetesVersion, b.kindVersion, recipe))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	t0 := time.Now()
	bins, err := cluster.KubernetesBinaries(ctx, cluster.AllKubernetesBinaries...)
	if err != nil {
		return "", err
	}
	kubeadm, err := cluster.KubeadmBinary(ctx)
	if err != nil {
		return "", err
	}
	b.timed("Kubernetes "+cluster.KubernetesVersion+" binaries and kubeadm", t0)
	wanted, err := b.output(ctx, "", kubeadm, "config", "images", "list", "--kubernetes-version", cluster.KubernetesVersion)
	if err != nil {
		return "", err
	}
	root, err := tarball.LayerFromFile(rootfs)
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(b.cache, ".server-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "kubernetes/server/bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	archives := map[string][]archiveImage{}
	var extra []archiveImage // into kube-proxy.tar
	for _, ref := range strings.Fields(wanted) {
		name := ref[strings.LastIndex(ref, "/")+1 : strings.LastIndex(ref, ":")]
		tag := ref[strings.LastIndex(ref, ":")+1:]
		switch name {
		case cluster.KubeAPIServer, cluster.KubeControllerManager, cluster.KubeScheduler, cluster.KubeProxy:
			img, err := componentImage(root, bins[name], "/usr/local/bin/"+name, []string{"/usr/local/bin/" + name})
			if err != nil {
				return "", err
			}
			archives[name] = append(archives[name], archiveImage{Ref: ref, Image: img})
		case "etcd":
			// The local cluster's etcd (cluster.EtcdVersion) under the
			// name kubeadm asks for: etcd of the same 3.6 line.
			etcd, err := cluster.EtcdBinary(ctx)
			if err != nil {
				return "", err
			}
			img, err := componentImage(root, etcd, "/usr/local/bin/etcd", []string{"/usr/local/bin/etcd"})
			if err != nil {
				return "", err
			}
			extra = append(extra, archiveImage{Ref: ref, Image: img})
		case "coredns":
			step := time.Now()
			coredns, err := cluster.GoModuleBinary(ctx, "coredns", "github.com/coredns/coredns", tag, "github.com/coredns/coredns")
			if err != nil {
				return "", err
			}
			b.timed("CoreDNS "+tag, step)
			img, err := componentImage(root, coredns, "/coredns", []string{"/coredns"})
			if err != nil {
				return "", err
			}
			extra = append(extra, archiveImage{Ref: ref, Image: img})
		case "pause":
			// kind replaces kubeadm's pause with its containerd sandbox image.
		default:
			return "", fmt.Errorf("kubeadm %s wants %s, which this builder does not make", cluster.KubernetesVersion, ref)
		}
	}
	kindImages, err := b.kindImages(ctx, root)
	if err != nil {
		return "", err
	}
	extra = append(extra, kindImages...)
	archives[cluster.KubeProxy] = append(archives[cluster.KubeProxy], extra...)
	for _, name := range []string{cluster.KubeAPIServer, cluster.KubeControllerManager, cluster.KubeScheduler, cluster.KubeProxy} {
		if len(archives[name]) == 0 {
			return "", fmt.Errorf("kubeadm %s did not ask for %s", cluster.KubernetesVersion, name)
		}
		if err := writeArchive(filepath.Join(bin, name+".tar"), archives[name]); err != nil {
			return "", fmt.Errorf("write %s.tar: %w", name, err)
		}
	}
	for name, src := range map[string]string{"kubeadm": kubeadm, "kubelet": bins[cluster.Kubelet], "kubectl": bins[cluster.Kubectl]} {
		if _, err := b.run(ctx, "", "cp", src, filepath.Join(bin, name)); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "kubernetes/version"), []byte(cluster.KubernetesVersion+"\n"), 0o644); err != nil {
		return "", err
	}
	if _, err := b.run(ctx, "", "tar", "-C", tmp, "-I", "gzip -1", "-cf", path+".tmp", "kubernetes"); err != nil {
		return "", err
	}
	b.timed("server tarball "+filepath.Base(path), t0)
	return path, os.Rename(path+".tmp", path)
}

// localPathProvisionerVersion is the github.com/rancher/local-path-provisioner
// release built for kind's storage image.
const localPathProvisionerVersion = "v0.0.30"

// kindImages are the images kind itself deploys, under the names the pinned
// kind's source gives them: the sandbox (pause) image of its containerd
// config, its CNI (kindnetd) and its storage provisioner and helper.
func (b *builder) kindImages(ctx context.Context, root v1.Layer) ([]archiveImage, error) {
	read := func(rel, pattern string) (string, error) {
		data, err := os.ReadFile(filepath.Join(b.kindDir, rel))
		if err != nil {
			return "", err
		}
		m := regexp.MustCompile(pattern).FindStringSubmatch(string(data))
		if m == nil {
			return "", fmt.Errorf("%s: no %s", rel, pattern)
		}
		return m[1], nil
	}
	pauseRef, err := read("images/base/files/etc/containerd/config.toml", `sandbox_image = "([^"]+)"`)
	if err != nil {
		return nil, err
	}
	kindnetRef, err := read("pkg/build/nodeimage/const_cni.go", `kindnetdImage = "([^"]+)"`)
	if err != nil {
		return nil, err
	}
	provisionerRef, err := read("pkg/build/nodeimage/const_storage.go", `storageProvisionerImage = "([^"]+)"`)
	if err != nil {
		return nil, err
	}
	helperRef, err := read("pkg/build/nodeimage/const_storage.go", `storageHelperImage = "([^"]+)"`)
	if err != nil {
		return nil, err
	}
	// kind's own image builds the release its images/local-path-provisioner/
	// Makefile names (v0.0.34 for kind v0.33.0), which the Go proxy refuses
	// (403); this builds the newest one it serves that has been tried.
	provisionerVersion := localPathProvisionerVersion

	pause, err := oci.BuildFor(ctx, b.root, images.Pause, runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	kindnetd := filepath.Join(b.cache, "kindnetd")
	if _, err := b.runEnv(ctx, []string{"CGO_ENABLED=0"}, "go", "build", "-C", b.root, "-o", kindnetd, "./kind/cmd/kindnetd"); err != nil {
		return nil, err
	}
	kindnet, err := componentImage(root, kindnetd, "/bin/kindnetd", []string{"/bin/kindnetd"})
	if err != nil {
		return nil, err
	}
	step := time.Now()
	lpp, err := cluster.GoModuleBinary(ctx, "local-path-provisioner", "github.com/rancher/local-path-provisioner", provisionerVersion, "github.com/rancher/local-path-provisioner")
	if err != nil {
		return nil, err
	}
	b.timed("local-path-provisioner "+provisionerVersion, step)
	provisioner, err := componentImage(root, lpp, "/usr/local/bin/local-path-provisioner", nil)
	if err != nil {
		return nil, err
	}
	// The helper runs sh, mkdir and rm in the volume's directory: the
	// Debian root has them.
	helper, err := mutate.AppendLayers(empty.Image, root)
	if err != nil {
		return nil, err
	}
	return []archiveImage{
		{Ref: pauseRef, Image: pause},
		{Ref: kindnetRef, Image: kindnet},
		{Ref: provisionerRef, Image: provisioner},
		{Ref: helperRef, Image: helper},
	}, nil
}
