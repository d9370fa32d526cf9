#!/usr/bin/env bash
# Installs what the offline kind path (KIND_OFFLINE=1) needs on a Debian host:
# Debian's docker.io (dockerd, containerd, runc) and debootstrap (kind's base
# image is assembled from a Debian root). Idempotent, non-interactive.
# No daemon is started: a policy-rc.d refusing every start is in place while
# apt runs (docker.io's maintainer scripts would start dockerd in the host's
# network namespace) and removed afterwards; kind/hack/dockerd.sh runs dockerd
# in a network namespace of its own.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v nsenter >/dev/null || need+=(util-linux)
command -v ip >/dev/null || need+=(iproute2)
command -v iptables-save >/dev/null || need+=(iptables)

if [ ${#need[@]} -eq 0 ]; then
  echo "kind install-deps: docker.io and debootstrap already installed"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "kind install-deps: need root to install: ${need[*]}" >&2
  exit 1
fi
echo "kind install-deps: installing ${need[*]}"
policy=/usr/sbin/policy-rc.d
if [ -e "$policy" ]; then
  # One is there already (container images ship one): keep it only if it
  # refuses every start, and leave it as it was.
  grep -qx 'exit 101' "$policy" || { echo "kind install-deps: $policy exists and does not refuse starts" >&2; exit 1; }
else
  trap 'rm -f "$policy"' EXIT
  printf '#!/bin/sh\n# refuse every service start while kind install-deps runs apt\nexit 101\n' >"$policy"
  chmod 0755 "$policy"
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}"
