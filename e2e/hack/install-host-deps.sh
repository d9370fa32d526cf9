#!/usr/bin/env bash
# Installs what the local real cluster (e2e/cluster) needs on a Debian host:
# containerd, runc and the CNI plugins (bridge, host-local, loopback in
# /usr/lib/cni), plus iptables and mount tools. Idempotent and
# non-interactive: does nothing when everything is present. containerd is
# only installed, never started as a service: the harness runs its own
# instance with its own config and socket in the run dir.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

need=()
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v iptables >/dev/null || need+=(iptables)
command -v ip >/dev/null || need+=(iproute2)
command -v mount >/dev/null || need+=(mount)

if [ ${#need[@]} -eq 0 ]; then
  echo "install-host-deps: containerd, runc, CNI plugins already installed"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-host-deps: need root to install: ${need[*]}" >&2
  exit 1
fi
echo "install-host-deps: installing ${need[*]}"
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}"
