package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/hack/filelock"
)

// suite is the Debian release of the node's root file system.
const suite = "bookworm"

// packages are those of kind's images/base/Dockerfile that Debian has, plus
// Debian's containerd, runc and CNI plugins, which kind builds from source
// hosts that cannot be reached offline. nfs-common and open-iscsi (storage
// tests) are left out. Debian's containerd is 1.6, not kind's 2.x: a node
// built here runs containerd 1.6.
var packages = []string{
	"systemd", "conntrack", "iptables", "nftables", "iproute2", "ethtool", "util-linux", "mount", "kmod",
	"libseccomp2", "pigz", "fuse-overlayfs", "e2fsprogs", "bash", "ca-certificates", "curl", "jq", "procps",
	"containerd", "runc", "containernetworking-plugins",
}

// rootfs returns a tarball of a Debian root with the packages, made once.
func (b *builder) rootfs(ctx context.Context) (string, error) {
	sum := sha256.Sum256([]byte(suite + " " + strings.Join(packages, ",")))
	path := filepath.Join(b.cache, fmt.Sprintf("rootfs-%s-%x.tar", suite, sum[:6]))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	err := filelock.With(ctx, path+".lock", func() error {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		t0 := time.Now()
		tmp, err := os.MkdirTemp(b.cache, ".rootfs-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir := filepath.Join(tmp, "root")
		if _, err := b.run(ctx, "", "debootstrap", "--variant=minbase", "--include="+strings.Join(packages, ","),
			suite, dir, mirror()); err != nil {
			return err
		}
		// What kind's clean-install removes after installing.
		for _, p := range []string{"var/lib/apt/lists", "var/cache/apt/archives", "usr/share/doc", "usr/share/man", "var/log"} {
			if err := clearDir(filepath.Join(dir, p)); err != nil {
				return err
			}
		}
		if _, err := b.run(ctx, "", "tar", "--numeric-owner", "--xattrs", "-C", dir, "-cf", path+".tmp", "."); err != nil {
			return err
		}
		b.timed("debootstrap root "+filepath.Base(path), t0)
		return os.Rename(path+".tmp", path)
	})
	return path, err
}

// mirror is the Debian mirror apt uses on this machine.
func mirror() string {
	for _, f := range []string{"/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			for _, w := range strings.Fields(line) {
				if strings.HasPrefix(w, "http") && strings.Contains(w, "/debian") && !strings.Contains(w, "security") {
					return w
				}
			}
		}
	}
	return "http://deb.debian.org/debian"
}

func clearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// ctrShim answers the two ctr commands kind v0.33 runs that Debian's
// containerd 1.6 ctr lacks: `ctr info` (its readiness check) and
// `ctr images import --label=...` (it pins the images it imports).
const ctrShim = `#!/bin/bash
# Debian's containerd 1.6 ctr lacks "info" and "images import --label";
# kind v0.33 (node image build) runs both. Everything else is ctr itself.
set -euo pipefail
real=/usr/bin/ctr
args=() labels=() sub=()
for a in "$@"; do
  case "$a" in
    --label=*) labels+=("${a#--label=}") ;;
    *) args+=("$a") ;;
  esac
  case "$a" in -*) ;; *) sub+=("$a") ;; esac
done
if [[ "${sub[0]:-}" == info ]]; then
  exec "$real" version
fi
if [[ ${#labels[@]} -eq 0 ]]; then
  exec "$real" "$@"
fi
ns=()
for a in "${args[@]}"; do case "$a" in --namespace=*|-n=*) ns+=("$a") ;; esac; done
before="$("$real" "${ns[@]}" images ls -q)"
"$real" "${args[@]}"
for img in $("$real" "${ns[@]}" images ls -q); do
  grep -qxF "$img" <<<"$before" && continue
  "$real" "${ns[@]}" images label "$img" "${labels[@]}" >/dev/null
done
`

// baseDockerfile is kind's images/base/Dockerfile's final stage on a
// Debian root that already holds the packages: kind's files, the same
// systemd set-up, containerd's base runtime spec, and the image settings.
const baseDockerfile = `FROM %[1]s
COPY files/ /
RUN chmod 755 /kind /kind/bin \
 && find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete \
 && rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
    /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
    /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/* \
 && echo "ReadKMsg=no" >> /etc/systemd/journald.conf \
 && ln -sf /usr/lib/systemd/systemd /sbin/init \
 && systemctl enable kubelet.service containerd.service undo-mount-hacks.service \
 && systemctl mask systemd-binfmt.service \
 && mkdir -p /etc/kubernetes/manifests /opt/cni/bin \
 && cp /usr/lib/cni/* /opt/cni/bin/ \
 && ln -sf /usr/bin/containerd /usr/local/bin/containerd \
 && sed -i 's/^\( *restrict_oom_score_adj *=\).*/\1 true/' /etc/containerd/config.toml \
 && /usr/bin/ctr oci spec \
    | jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
    | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json \
 && containerd --version
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]
`

// baseImage builds kind's base image from the root tarball unless the
// engine has it. restrict_oom_score_adj: root without CAP_SYS_RESOURCE
// cannot lower a process's OOM score.
func (b *builder) baseImage(ctx context.Context, rootfs string) error {
	ref := b.baseRef()
	if b.hasImage(ctx, ref) {
		return nil
	}
	t0 := time.Now()
	rootRef := ref + "-rootfs"
	if _, err := b.run(ctx, "", b.docker, "import", rootfs, rootRef); err != nil {
		return err
	}
	ctxDir, err := os.MkdirTemp(b.cache, ".base-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ctxDir)
	files := filepath.Join(ctxDir, "files")
	if err := copyKindFiles(filepath.Join(b.kindDir, "images/base/files"), files); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(files, "usr/local/bin/ctr"), []byte(ctrShim), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(fmt.Sprintf(baseDockerfile, rootRef)), 0o644); err != nil {
		return err
	}
	cmd := []string{"build", "--network", "none", "-t", ref, ctxDir}
	if _, err := b.runEnv(ctx, []string{"DOCKER_BUILDKIT=0"}, b.docker, cmd...); err != nil {
		return err
	}
	b.timed("base image "+ref, t0)
	return nil
}

// copyKindFiles copies kind's images/base/files with the modes its
// Dockerfile gives them (COPY --chmod): executables under usr/local/bin and
// kind/bin 0755, everything else 0644, directories 0755.
func copyKindFiles(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o644)
		if strings.HasPrefix(rel, "usr/local/bin/") || strings.HasPrefix(rel, "kind/bin/") {
			mode = 0o755
		}
		if err := os.WriteFile(target, data, mode); err != nil {
			return err
		}
		return os.Chmod(target, mode) // the module cache's files are read-only; umask aside
	})
}
