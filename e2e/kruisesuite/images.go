// Package kruisesuite runs OpenKruise's own SidecarTerminator end-to-end
// test (test/e2e/apps/v1alpha1/sidecarterminator.go of the
// github.com/openkruise/kruise module at cluster.KruiseVersion, built from the
// module cache, not copied) against the local real cluster, with this
// controller doing the terminating. See README.md.
package kruisesuite

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// The references OpenKruise's suite names, with imagePullPolicy
// IfNotPresent: imported into the node under these names, they are never
// pulled.
const (
	BusyboxRef = "busybox:latest"
	NginxRef   = "nginx:latest"
)

// epoch is every file's and the image's timestamp: the same packages give
// the same image digest.
var epoch = time.Unix(0, 0).UTC()

// image is one of the two stand-ins: which Debian packages make its root
// and how its config differs from nothing.
type image struct {
	ref string
	// packages are unpacked (dpkg-deb -x, no maintainer scripts) into the
	// root in this order.
	packages []string
	// finish adds what the packages' maintainer scripts or the upstream
	// image would have made.
	finish func(root string) error
	// binary, if set, must find every shared library it needs in the root.
	binary string
	config v1.Config
}

var (
	busybox = image{
		ref:      BusyboxRef,
		packages: []string{"busybox-static"},
		finish:   finishBusybox,
		config: v1.Config{
			Cmd: []string{"sh"},
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		},
	}
	// nginx is Debian's nginx binary, its configuration (nginx-common) and
	// the shared libraries it links, found by following the lib* packages
	// of its Depends (libc6, libcrypt1, libpcre2-8-0, libssl3, zlib1g and
	// theirs); the rest of its dependencies serve maintainer scripts only.
	nginx = image{
		ref:      NginxRef,
		packages: []string{"nginx", "nginx-common"},
		finish:   finishNginx,
		binary:   "usr/sbin/nginx",
		config: v1.Config{
			Cmd:          []string{"nginx", "-g", "daemon off;"},
			Env:          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			StopSignal:   "SIGQUIT",
			ExposedPorts: map[string]struct{}{"80/tcp": {}},
		},
	}
)

// WriteImages builds the busybox and nginx stand-ins from Debian packages
// (downloaded once with apt-get into the binary cache) and writes them as
// tarballs into dir, tagged busybox:latest and nginx:latest, for
// Node.ImportImages.
func WriteImages(ctx context.Context, dir string) ([]string, error) {
	cache, err := cluster.CacheDir()
	if err != nil {
		return nil, err
	}
	debs := filepath.Join(cache, "debian-packages")
	var out []string
	for _, im := range []image{busybox, nginx} {
		p, err := im.write(ctx, debs, dir)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", im.ref, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func (im image) write(ctx context.Context, debs, dir string) (string, error) {
	pkgs := im.packages
	if im.ref == NginxRef {
		libs, err := libraryClosure(ctx, debs, "nginx")
		if err != nil {
			return "", err
		}
		pkgs = append(append([]string(nil), pkgs...), libs...)
	}
	files, err := download(ctx, debs, pkgs)
	if err != nil {
		return "", err
	}
	root, err := os.MkdirTemp("", "kruisesuite-root-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(root)
	for _, f := range files {
		if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", f, root).CombinedOutput(); err != nil {
			return "", fmt.Errorf("dpkg-deb -x %s: %w: %s", f, err, out)
		}
	}
	if err := im.finish(root); err != nil {
		return "", err
	}
	if im.binary != "" {
		if err := checkLinked(root, im.binary); err != nil {
			return "", err
		}
	}
	layer, err := dirLayer(root)
	if err != nil {
		return "", err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Created = debArch(ctx), "linux", v1.Time{Time: epoch}
	cf.Config = im.config
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", err
	}
	tag, err := name.NewTag(im.ref)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dir, strings.Split(im.ref, ":")[0]+".tar")
	if err := tarball.WriteToFile(p, tag, img); err != nil {
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	return p, nil
}

// checkLinked follows the DT_NEEDED entries of root/binary and of each
// library they name, and fails if one is in none of root's library dirs.
func checkLinked(root, binary string) error {
	dirs, _ := filepath.Glob(filepath.Join(root, "lib", "*-linux-gnu"))
	more, _ := filepath.Glob(filepath.Join(root, "usr", "lib", "*-linux-gnu"))
	dirs = append(append(dirs, more...), filepath.Join(root, "lib"), filepath.Join(root, "usr", "lib"))
	seen := map[string]bool{}
	queue := []string{filepath.Join(root, binary)}
	for len(queue) > 0 {
		f, err := elf.Open(queue[0])
		if err != nil {
			return fmt.Errorf("read %s: %w", queue[0], err)
		}
		needed, err := f.ImportedLibraries()
		f.Close()
		if err != nil {
			return fmt.Errorf("read %s: %w", queue[0], err)
		}
		queue = queue[1:]
		for _, n := range needed {
			if seen[n] {
				continue
			}
			seen[n] = true
			found := ""
			for _, d := range dirs {
				if _, err := os.Stat(filepath.Join(d, n)); err == nil {
					found = filepath.Join(d, n)
					break
				}
			}
			if found == "" {
				return fmt.Errorf("%s needs %s, which none of its packages ships", binary, n)
			}
			queue = append(queue, found)
		}
	}
	return nil
}

// finishBusybox links every applet of Debian's busybox-static to it (the
// package ships the binary alone; the upstream image has a hard link per
// applet) and adds the few files a shell expects.
func finishBusybox(root string) error {
	bb := filepath.Join(root, "bin", "busybox")
	out, err := exec.Command(bb, "--list-full").Output()
	if err != nil {
		return fmt.Errorf("%s --list-full: %w", bb, err)
	}
	for _, a := range strings.Fields(string(out)) {
		p := filepath.Join(root, a)
		if p == bb {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.Symlink("/bin/busybox", p); err != nil && !os.IsExist(err) {
			return err
		}
	}
	return writeBase(root, "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
		"root:x:0:\nnogroup:x:65534:\n")
}

// finishNginx does what nginx-common's maintainer scripts and the upstream
// image do: the www-data user nginx.conf names, the default site enabled,
// the state and log dirs, the logs sent to the container's output.
func finishNginx(root string) error {
	if err := writeBase(root,
		"root:x:0:0:root:/root:/bin/sh\nwww-data:x:33:33:www-data:/var/www:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"root:x:0:\nwww-data:x:33:\nnogroup:x:65534:\n"); err != nil {
		return err
	}
	for _, d := range []string{"var/lib/nginx", "var/log/nginx", "etc/nginx/sites-enabled", "etc/nginx/modules-enabled", "var/www/html"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	links := map[string]string{
		"etc/nginx/sites-enabled/default": "/etc/nginx/sites-available/default",
		"var/log/nginx/access.log":        "/dev/stdout",
		"var/log/nginx/error.log":         "/dev/stderr",
	}
	for p, target := range links {
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil && !os.IsExist(err) {
			return err
		}
	}
	index := filepath.Join(root, "var/www/html/index.html")
	return os.WriteFile(index, []byte("<html><body>nginx</body></html>\n"), 0o644)
}

// writeBase writes /etc/passwd and /etc/group and makes /tmp, /root and /run.
func writeBase(root, passwd, group string) error {
	for _, d := range []struct {
		path string
		mode fs.FileMode
	}{{"etc", 0o755}, {"root", 0o700}, {"run", 0o755}, {"tmp", 0o777 | fs.ModeSticky}} {
		p := filepath.Join(root, d.path)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(p, d.mode); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte(passwd), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, "etc", "group"), []byte(group), 0o644)
}

// dirLayer is one uncompressed tar of root: directories, regular files
// and symlinks, owned by root, timestamps at epoch.
func dirLayer(root string) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		h.ModTime, h.AccessTime, h.ChangeTime = epoch, time.Time{}, time.Time{}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("tar %s: %w", root, err)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}
