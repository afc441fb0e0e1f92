# What the peer scripts (hack/peers/*.sh) share (sourced, after they set `peer`, the name of their
# state directory $MUSTER_CLUSTER_DIR/<peer>/). A peer's processes run locally against the harness
# cluster; process NAME keeps its pid in $state/NAME.pid and logs to $logs/NAME.log.
# shellcheck shell=bash
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
export GOTOOLCHAIN=local CGO_ENABLED=0
# shellcheck disable=SC2154  # peer: set by the sourcing script
state=$MUSTER_CLUSTER_DIR/$peer
logs=$MUSTER_CLUSTER_DIR/logs
KUBECTL=$K8S_BIN/kubectl
kc() { "$KUBECTL" --kubeconfig "$MUSTER_CLUSTER_DIR/kubeconfig" "$@"; }

# go_module MODULE VERSION: download MODULE@vVERSION alone (not its dependencies: `go build` fetches
# just the packages it compiles, and one scheduler-plugins names is refused by the proxy); sets
# module_dir (the unpacked, read-only module) and module_hash (the commit it was made from, if known).
go_module() {
  local info
  info=$(GOFLAGS="" go mod download -json "$1@v$2") || { printf '%s\n' "$info" >&2; return 1; }
  module_dir=$(python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error")))' <<<"$info") ||
    return 1
  # shellcheck disable=SC2034  # read by callers
  module_hash=$(python3 -c 'import json, sys; print((json.load(sys.stdin).get("Origin") or {}).get("Hash", ""))' <<<"$info")
}

# go_module_build DEST MODULE VERSION FILE=PACKAGE...: build each PACKAGE of MODULE@vVERSION into
# DEST/FILE, DEST being the cache directory $MUSTER_CACHE/<name>-<version>/ (filled aside, then
# swapped in whole, so a failed build leaves none); prints DEST. The caller defines
# `peer_files SRC OUT` (copy what else DEST keeps from the module SRC into OUT) and may define
# `peer_source MODULE_DIR SRC` (fill SRC with a writable copy to build in; the module cache is read-only).
go_module_build() {
  local dest=$1 module=$2 version=$3; shift 3
  command -v go >/dev/null || die "go is not on PATH"
  go_module "$module" "$version" || die "cannot download $module v$version"
  mkdir -p "$MUSTER_CACHE"
  local out src=$module_dir t0 c
  out=$(mktemp -d "$MUSTER_CACHE/.build.XXXXXX")
  if declare -F peer_source >/dev/null; then
    src=$out/src
    if ! (peer_source "$module_dir" "$src"); then rm -rf "$out"; exit 1; fi
  fi
  log "building ${*%%=*} of $module v$version into $dest (minutes on 2 cores)"
  t0=$(date +%s)
  for c in "$@"; do
    # Inside the module with -mod=readonly, so its go.sum pins every dependency.
    if ! (cd "$src" && GOFLAGS=-mod=readonly nice go build -trimpath -ldflags "-s -w" -o "$out/${c%%=*}" "${c#*=}"); then
      rm -rf "$out"; die "build of ${c%%=*} ($module v$version) failed"
    fi
  done
  peer_files "$src" "$out"
  rm -rf "$out/src"
  chmod -R u+w,a+rX "$out"
  rm -rf "$dest"; mv "$out" "$dest"
  log "$module v$version built in $(( $(date +%s) - t0 ))s"
  echo "$dest"
}

# peer_need_cluster: die unless the harness cluster is there.
peer_need_cluster() {
  [[ -s $MUSTER_CLUSTER_DIR/kubeconfig ]] || die "no harness cluster at $MUSTER_CLUSTER_DIR (make cluster-up)"
}

# peer_ports VAR...: set each VAR to a distinct free port on 127.0.0.1; all of them go to $state/ports.env.
peer_ports() {
  local v port used=" "
  for v in "$@"; do
    port=0
    while [[ $port == 0 || $used == *" $port "* ]]; do
      port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    done
    used+="$port "; printf -v "$v" '%s' "$port"
    echo "$v=$port" >> "$state/ports.env"
  done
}

# peer_cert NAME SUBJECT USAGE [SAN]: $state/NAME.key (ECDSA) and $state/NAME.crt, signed by the harness CA.
peer_cert() {
  local name=$1 subj=$2 usage=$3 san=${4:-} pki=$MUSTER_CLUSTER_DIR/pki
  openssl ecparam -name prime256v1 -genkey -noout -out "$state/$name.key" 2>/dev/null
  openssl req -new -key "$state/$name.key" -subj "$subj" -out "$state/$name.csr" 2>/dev/null
  {
    printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n' "$usage"
    [[ -z $san ]] || echo "subjectAltName=$san"
  } > "$state/$name.ext"
  openssl x509 -req -in "$state/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -sha256 -extfile "$state/$name.ext" -out "$state/$name.crt" 2>/dev/null
  rm -f "$state/$name.csr" "$state/$name.ext"
  chmod 600 "$state/$name.key"
}

# peer_serving_cert CN: $state/serving.{crt,key} for a server on loopback.
peer_serving_cert() { peer_cert serving "/CN=$1" serverAuth "IP:127.0.0.1,DNS:localhost"; }

# peer_identity CN: a client certificate in system:masters (like the harness's kwok: no RBAC objects
# to install) and $state/kubeconfig, which uses it.
peer_identity() {
  peer_cert client "/O=system:masters/CN=$1" clientAuth
  local server
  server=$(awk '/server:/ {print $2; exit}' "$MUSTER_CLUSTER_DIR/kubeconfig")
  cat > "$state/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: muster-local
  cluster: {server: $server, certificate-authority: $MUSTER_CLUSTER_DIR/pki/ca.crt}
users:
- name: $1
  user: {client-certificate: $state/client.crt, client-key: $state/client.key}
contexts:
- name: muster-local
  context: {cluster: muster-local, user: $1}
current-context: muster-local
EOF
}

# peer_apply_crds PATH: apply the CRDs in PATH (a file or directory) and wait until Established.
# Server-side: some CRDs exceed client-side apply's annotation limit.
peer_apply_crds() {
  kc apply --server-side --force-conflicts --field-manager=muster-peers -f "$1" >/dev/null ||
    die "applying $peer's CRDs failed"
  kc wait --for condition=Established --timeout=60s -f "$1" >/dev/null || die "$peer's CRDs not Established"
}

# peer_launcher: words run before a process's binary (empty: none); a launcher must end by
# exec'ing the words it is given, so the pid stays the process's.
peer_launcher=()

# peer_start NAME BINARY ARGS...: run BINARY in its own session (behind peer_launcher), logging to
# $logs/NAME.log; its pid goes to $state/NAME.pid, BINARY to $state/NAME.bin (see peer_running).
peer_start() {
  local name=$1 bin=$2; shift 2
  mkdir -p "$logs"
  echo "$bin $*" > "$state/$name.cmd"
  echo "$bin" > "$state/$name.bin"
  setsid "${peer_launcher[@]}" "$bin" "$@" >>"$logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$state/$name.pid"
}

# peer_running NAME: its recorded pid is alive and runs its recorded binary (not a reused pid).
peer_running() {
  local pid bin
  pid=$(cat "$state/$1.pid" 2>/dev/null) || return 1
  bin=$(cat "$state/$1.bin" 2>/dev/null) || return 1
  [[ -n $pid && -n $bin && -d /proc/$pid ]] && grep -qF "$bin" "/proc/$pid/cmdline" 2>/dev/null
}

# peer_died NAME WHAT: die with the tail of NAME's log, WHAT saying how it went.
peer_died() {
  tail -n 30 "$logs/$1.log" >&2; die "$1 $2; log: $logs/$1.log"
}

# peer_wait_ready NAME URL: poll URL (certificates not checked) for up to 120 s; die if NAME exits.
# Its pid alone is checked: while a process execs (the launcher's wrappers do) its cmdline can read
# empty for a moment, and a pid just started cannot have been reused.
peer_wait_ready() {
  local name=$1 url=$2 pid deadline=$(( $(date +%s) + 120 ))
  pid=$(cat "$state/$name.pid")
  until curl -fsSk --max-time 2 "$url" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || peer_died "$name" "exited during startup"
    (( $(date +%s) < deadline )) || peer_died "$name" "not ready after 120s"
    sleep 0.5
  done
}

# peer_all_running NAME...: every one runs (then says so, with their pids).
peer_all_running() {
  local n pids=""
  for n in "$@"; do peer_running "$n" || return 1; pids+=" $n $(cat "$state/$n.pid")"; done
  log "$peer already running (pids:$pids)"
}

# peer_stop NAME: TERM its recorded pid if that still runs its binary, KILL after 10 s.
peer_stop() {
  local pid _
  pid=$(cat "$state/$1.pid" 2>/dev/null) || pid=""
  if [[ -n $pid ]] && peer_running "$1"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    log "$1 stopped (pid $pid)"
  fi
  rm -f "$state/$1.pid"
}

# peer_fresh_state NAME...: stop what is left of those processes, then an empty $state (mode 700).
peer_fresh_state() {
  local n
  for n in "$@"; do peer_stop "$n" 2>/dev/null; done
  rm -rf "$state"; mkdir -p "$state" "$logs"; chmod 700 "$state"
}

# peer_main ARG: the command line every peer script takes.
peer_main() {
  case ${1:-} in
    build) build ;;
    up) up ;;
    down) down ;;
    *) die "usage: hack/peers/$peer.sh build|up|down" ;;
  esac
}
