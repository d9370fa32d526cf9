package kruisesuite

import (
	"slices"
	"testing"
)

// The head of `apt-cache depends --recurse --no-recommends --no-suggests
// --no-conflicts --no-breaks --no-replaces --no-enhances nginx` on Debian
// bookworm (2026-11-25).
const nginxDepends = `nginx
  Depends: libc6
  Depends: libcrypt1
  Depends: libpcre2-8-0
  Depends: libssl3
  Depends: zlib1g
  Depends: iproute2
  Depends: nginx-common
  Depends: nginx-common
libc6
  Depends: libgcc-s1
libcrypt1
  Depends: libc6
libpcre2-8-0
  Depends: libc6
libssl3
  Depends: libc6
zlib1g
  Depends: libc6
iproute2
 |Depends: debconf
  Depends: <debconf-2.0>
    cdebconf
    debconf
  Depends: libbpf1
  Depends: libbsd0
  Depends: libc6
nginx-common
 |Depends: debconf
  Depends: <debconf-2.0>
    cdebconf
    debconf
libgcc-s1
 PreDepends: gcc-12-base
  Depends: libc6
`

func TestParseDependsTakesTheFirstAlternativeAndSkipsVirtualPackages(t *testing.T) {
	deps := parseDepends(nginxDepends)
	if got, want := deps["nginx-common"], []string{"debconf"}; !slices.Equal(got, want) {
		t.Errorf("nginx-common depends on %v, want %v", got, want)
	}
	if got, want := deps["iproute2"], []string{"debconf", "libbpf1", "libbsd0", "libc6"}; !slices.Equal(got, want) {
		t.Errorf("iproute2 depends on %v, want %v", got, want)
	}
	if got, want := deps["libgcc-s1"], []string{"gcc-12-base", "libc6"}; !slices.Equal(got, want) {
		t.Errorf("libgcc-s1 depends on %v, want %v (Pre-Depends included)", got, want)
	}
}

// The nginx image gets the libraries its binary links and none of the
// packages that only its maintainer scripts use (iproute2, debconf).
func TestLibrariesFollowOnlySharedLibraryPackages(t *testing.T) {
	got := libraries(parseDepends(nginxDepends), "nginx")
	want := []string{"libc6", "libcrypt1", "libgcc-s1", "libpcre2-8-0", "libssl3", "zlib1g"}
	if !slices.Equal(got, want) {
		t.Errorf("libraries(nginx) = %v, want %v", got, want)
	}
}
