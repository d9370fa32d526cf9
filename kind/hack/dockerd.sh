#!/usr/bin/env bash
# A Docker engine for kind that leaves the host alone (KIND_OFFLINE=1, or any
# machine without a Docker engine of its own):
#   kind/hack/dockerd.sh start        dockerd in a network namespace of its own
#   kind/hack/dockerd.sh run CMD...   CMD inside that namespace, DOCKER_HOST set
#   kind/hack/dockerd.sh stop         stop it, delete the namespace, check the host
#   kind/hack/dockerd.sh status
# dockerd runs with `nsenter --net` (not `ip netns exec`, which remounts /sys
# and hides the host's cgroup v1 mounts from dockerd), with its own data
# root, exec root, pid file and socket, so its bridges and iptables chains
# live in the namespace only. Its default runtime is kind/cmd/runc-nocap,
# which drops CAP_SYS_RESOURCE from privileged containers (root here cannot
# grant it). Clients (docker, kind, kubectl, the tests) run inside the
# namespace: kind publishes the API server on the namespace's 127.0.0.1.
# start snapshots the host's iptables rules and network interfaces; stop
# compares them and fails if anything of this engine's is left on the host.
# Needs root and kind/hack/install-deps.sh's packages.
set -euo pipefail
cd "$(dirname "$0")/../.."

NETNS="${KIND_NETNS:-sidecar-terminator-kind}"
CACHE="${SIDECAR_TERMINATOR_CACHE:-$HOME/.cache/sidecar-terminator}"
# The data root persists, so built node images survive a stop.
DATA="${KIND_DOCKER_DATA:-$CACHE/kind/docker}"
RUN="${KIND_DOCKER_RUN:-/run/$NETNS}"
SOCK="$RUN/docker.sock"
PIDFILE="$RUN/dockerd.pid"
LOG="$RUN/dockerd.log"
export DOCKER_HOST="unix://$SOCK"

# Docker's own CLI: /usr/local/bin may hold another one.
DOCKER=docker
[[ -x /usr/bin/docker ]] && DOCKER=/usr/bin/docker

log() { echo "dockerd.sh: $*" >&2; }

running() { [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

# host_state prints what this engine must not change on the host: iptables
# rules (both backends, no counters, no timestamps) and interface names.
host_state() {
  local save
  for save in iptables-save ip6tables-save iptables-legacy-save ip6tables-legacy-save; do
    command -v "$save" >/dev/null || continue
    echo "## $save"
    "$save" 2>/dev/null | grep -v '^#' | sed -E 's/ \[[0-9]+:[0-9]+\]$//' || true
  done
  echo "## interfaces"
  ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort
}

# ours matches what a Docker engine or kind would leave on a host.
ours='docker0|br-[0-9a-f]{12}|DOCKER|veth[0-9a-f]{7}\b|kind'

# check_host compares the host with the snapshot start took. Differences
# that are not this engine's (another process on the host changed its own
# rules meanwhile) are shown; any of this engine's fails.
check_host() {
  local before="$RUN/host-before.txt" after="$RUN/host-after.txt"
  [[ -f "$before" ]] || { log "no host snapshot in $before"; return 1; }
  host_state >"$after"
  if diff -q "$before" "$after" >/dev/null; then
    log "host check: iptables rules and interfaces as before ($(grep -c . "$after") lines compared)"
    return 0
  fi
  local d
  d="$(diff "$before" "$after" | grep '^[<>]' || true)"
  if grep -Eq "$ours" <<<"$d"; then
    log "host check FAILED: this engine's rules or interfaces on the host:"
    grep -E "$ours" <<<"$d" >&2
    return 1
  fi
  log "host check: none of this engine's rules or interfaces on the host; changed meanwhile by others:"
  echo "$d" | head -20 >&2
}

start() {
  if running; then
    log "running (pid $(cat "$PIDFILE")), DOCKER_HOST=$DOCKER_HOST, netns $NETNS"
    return 0
  fi
  [[ "$(id -u)" == 0 ]] || { log "needs root"; exit 1; }
  command -v dockerd >/dev/null || { log "no dockerd: kind/hack/install-deps.sh"; exit 1; }
  mkdir -p "$RUN" "$DATA"
  host_state >"$RUN/host-before.txt"
  # The runtime wrapper, built where dockerd finds it.
  go build -o "$RUN/runc-nocap" ./kind/cmd/runc-nocap
  if ! ip netns list | grep -qw "$NETNS"; then
    ip netns add "$NETNS"
  fi
  ip -n "$NETNS" link set lo up
  # setsid: dockerd outlives the make target that started it.
  setsid nsenter --net="/run/netns/$NETNS" dockerd \
    --data-root "$DATA" --exec-root "$RUN/exec" --pidfile "$PIDFILE" \
    -H "$DOCKER_HOST" --storage-driver overlay2 \
    --add-runtime "nocap=$RUN/runc-nocap" --default-runtime nocap \
    </dev/null >"$LOG" 2>&1 &
  local i
  for i in $(seq 60); do
    if [[ -S "$SOCK" ]] && "$DOCKER" info >/dev/null 2>&1; then
      log "dockerd ready in netns $NETNS (pid $(cat "$PIDFILE")), DOCKER_HOST=$DOCKER_HOST, log $LOG"
      return 0
    fi
    sleep 0.5
  done
  log "dockerd did not come up; its log:"
  tail -20 "$LOG" >&2
  stop || true
  exit 1
}

stop() {
  if running; then
    local pid
    pid="$(cat "$PIDFILE")"
    kill -TERM "$pid"
    local i
    for i in $(seq 120); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "dockerd $pid still running after 60 s; killing it"
      kill -KILL "$pid" || true
    fi
    log "dockerd $pid stopped"
  fi
  # Processes still in the namespace (containerd shims of containers that
  # did not stop): by PID, the namespace's own only.
  if [[ -e "/run/netns/$NETNS" ]]; then
    local pids
    pids="$(ip netns pids "$NETNS" 2>/dev/null || true)"
    if [[ -n "$pids" ]]; then
      log "left in netns $NETNS: $(echo $pids); stopping them"
      kill -TERM $pids 2>/dev/null || true
      sleep 2
      kill -KILL $(ip netns pids "$NETNS" 2>/dev/null) 2>/dev/null || true
    fi
    ip netns delete "$NETNS"
  fi
  # Mounts dockerd made under its roots and did not undo.
  local m
  for m in $(awk -v a="$DATA" -v b="$RUN" '$2 ~ "^"a || $2 ~ "^"b {print $2}' /proc/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  check_host
}

status() {
  if running; then
    echo "dockerd running (pid $(cat "$PIDFILE")) in netns $NETNS, DOCKER_HOST=$DOCKER_HOST"
    "$DOCKER" ps -a
  else
    echo "dockerd not running (netns $NETNS)"
    return 1
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  check-host) check_host ;;
  env) echo "export DOCKER_HOST=$DOCKER_HOST KIND_NETNS=$NETNS" ;;
  run)
    shift
    running || { log "dockerd is not running: $0 start"; exit 1; }
    exec nsenter --net="/run/netns/$NETNS" env DOCKER_HOST="$DOCKER_HOST" "$@"
    ;;
  *) echo "usage: $0 start|stop|status|check-host|env|run CMD..." >&2; exit 2 ;;
esac
