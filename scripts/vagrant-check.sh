#!/usr/bin/env bash
# Boot the Vagrantfile for real on this machine, offline from any box catalogue, and tear it down:
#   1. Debian packages: vagrant, vagrant-libvirt, libvirt, qemu, and the box build's tools;
#   2. libvirtd (started here, and stopped at the end, if it is not running);
#   3. the local box testbed/bookworm-local, built from Debian packages (python -m testbed.vm.box)
#      and added with `vagrant box add` (once; --rebuild builds and adds it again);
#   4. `vagrant up --provider libvirt --no-provision` (KVM where usable, else qemu's software
#      emulation), then `vagrant provision`: the README's set-up (scripts/setup.sh);
#   5. `vagrant ssh -c`: the quick start, then a test subset, inside the VM, their results written
#      to a host folder shared with the VM (/vagrant-results) and checked here;
#   6. `vagrant destroy -f`, always.
# The VM is made from a copy of the committed tree (HEAD), so edits in progress do not reach it.
# Prints each step's time and writes them to <results>/times.txt; vagrant's output lines carry the
# seconds since the start. Exit 0 only if every step passed.
#   sudo bash scripts/vagrant-check.sh [--rebuild] [--keep-results DIR] [--substrate SUBSTRATE]
# --substrate: the quick start's substrate inside the VM (run as root there). Default: auto (netns)
# where KVM is usable; sim under software emulation, where the netns run's real PyTorch agents
# run far slower than its time scale assumes.
# Environment: TESTBED_VM_CPUS (default 2), TESTBED_VM_MEMORY_MB (default 4096), and
# TESTBED_VM_WHEELS (default /opt/wheels when it exists: wheels pip prefers, e.g. a CPU-only torch).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CHECKOUT=$(pwd)

rebuild=0
keep=""
substrate=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rebuild) rebuild=1 ;;
    --keep-results) keep="${2:?--keep-results needs a folder}"; shift ;;
    --substrate) substrate="${2:?--substrate needs a name}"; shift ;;
    *) echo "error: unknown argument: $1 (usage: scripts/vagrant-check.sh [--rebuild] [--keep-results DIR] [--substrate SUBSTRATE])" >&2; exit 2 ;;
  esac
  shift
done
case "$substrate" in
  *[!a-z]*) echo "error: --substrate: not a substrate name: $substrate" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "error: run as root (libvirt, the box build: debootstrap, chroot, loop mount)" >&2; exit 2; }

T0=$(date +%s)
STEP_T=$T0
WORK=$(mktemp -d /tmp/vagrant-check.XXXXXX)
# The VM gets the committed tree (HEAD), not whatever is being edited in the checkout
REPO="$WORK/testbed"
mkdir "$REPO"
git -C "$CHECKOUT" archive --format=tar HEAD | tar -x -C "$REPO"
RESULTS="$WORK/results"
mkdir -m 0777 "$RESULTS"        # the VM's qemu (user libvirt-qemu) writes here through 9p
chmod 0755 "$WORK"
TIMES="$RESULTS/times.txt"
STARTED_PIDS=""
UP=0
BOX=testbed/bookworm-local
export VAGRANT_DOTFILE_PATH="$WORK/dot-vagrant"   # the VM's state: not in the checkout
export VAGRANT_CHECKPOINT_DISABLE=1
export TESTBED_VAGRANT_BOX=$BOX TESTBED_PROVISION_TESTS=0 TESTBED_VM_RESULTS="$RESULTS"
export TESTBED_VM_CPUS=${TESTBED_VM_CPUS:-2} TESTBED_VM_MEMORY_MB=${TESTBED_VM_MEMORY_MB:-4096}
if [ -z "${TESTBED_VM_WHEELS:-}" ] && [ -d /opt/wheels ]; then export TESTBED_VM_WHEELS=/opt/wheels; fi
# CA certificates this host added (e.g. a TLS-inspecting proxy's): the VM's pip must trust them too
if [ -z "${TESTBED_VM_CA_DIR:-}" ] && ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
  export TESTBED_VM_CA_DIR=/usr/local/share/ca-certificates
fi
STEP=start
CHAINS_BEFORE=0
iptables -S LIBVIRT_INP >/dev/null 2>&1 && CHAINS_BEFORE=1

log() { echo "[vagrant-check +$(( $(date +%s) - T0 )) s] $*"; }
stamped() {  # each line of a command's output prefixed with the seconds since the start
  local line
  while IFS= read -r line; do printf '[+%d s] %s\n' "$(( $(date +%s) - T0 ))" "$line"; done
}
step_done() {  # step_done NAME: its wall time to times.txt
  local now; now=$(date +%s)
  echo "$1 $(( now - STEP_T )) s" | tee -a "$TIMES"
  STEP_T=$now
}
step() { STEP=$1; log "$1"; }
# libvirtd's firewall chains (LIBVIRT_INP, ... and the jumps to them): made at its first network
# start and never removed by it. Removed at the end when the libvirtd this script started made them
# (absent before) and they are empty again.
LIBVIRT_CHAINS="filter:INPUT:LIBVIRT_INP filter:OUTPUT:LIBVIRT_OUT filter:FORWARD:LIBVIRT_FWX filter:FORWARD:LIBVIRT_FWI filter:FORWARD:LIBVIRT_FWO nat:POSTROUTING:LIBVIRT_PRT mangle:POSTROUTING:LIBVIRT_PRT"
remove_libvirt_chains() {
  local tool entry table parent chain
  for tool in iptables ip6tables; do
    command -v "$tool" >/dev/null || continue
    for entry in $LIBVIRT_CHAINS; do
      IFS=: read -r table parent chain <<<"$entry"
      "$tool" -t "$table" -S "$chain" >/dev/null 2>&1 || continue
      [ "$("$tool" -t "$table" -S "$chain" | wc -l)" = 1 ] || continue   # only its -N line: empty
      "$tool" -t "$table" -D "$parent" -j "$chain" 2>/dev/null
      "$tool" -t "$table" -X "$chain" 2>/dev/null
    done
  done
}

cleanup() {
  local rc=$?
  set +e
  if [ "$rc" != 0 ]; then
    echo "FAILED: $STEP, after $(( $(date +%s) - STEP_T )) s in that step (exit $rc)" | tee -a "$TIMES"
    STEP_T=$(date +%s)
  fi
  if [ "$UP" = 1 ]; then
    log "vagrant destroy -f"
    (cd "$REPO" && vagrant destroy -f) || rc=1
    STEP_T=${STEP_T:-$T0}; step_done destroy
  fi
  if [ -n "$STARTED_PIDS" ]; then  # the network vagrant-libvirt made on the libvirtd we started (its dnsmasq, bridge)
    virsh -c qemu:///system net-destroy vagrant-libvirt >/dev/null 2>&1
  fi
  for pid in $STARTED_PIDS; do   # only the daemons this script started, by their PIDs
    kill "$pid" 2>/dev/null
  done
  if [ -n "$STARTED_PIDS" ] && [ "$CHAINS_BEFORE" = 0 ]; then
    for pid in $STARTED_PIDS; do for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done; done
    remove_libvirt_chains
  fi
  echo "total $(( $(date +%s) - T0 )) s (exit $rc)" | tee -a "$TIMES"
  if [ -n "$keep" ]; then mkdir -p "$keep" && cp -r "$RESULTS/." "$keep/"; fi
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 1. packages
STEP=packages
PKGS="vagrant vagrant-libvirt libvirt-daemon-system libvirt-clients qemu-system-x86 qemu-utils dnsmasq-base debootstrap extlinux rsync e2fsprogs"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  log "installing:$missing"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
step_done packages

# 2. libvirtd
STEP=libvirtd
if ! virsh -c qemu:///system uri >/dev/null 2>&1; then
  log "starting virtlogd and libvirtd (no init system runs them here)"
  for d in virtlogd libvirtd; do
    pidfile=/run/$d.pid
    if ! { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }; then
      "$d" -d
      for _ in $(seq 50); do [ -s "$pidfile" ] && break; sleep 0.1; done
      STARTED_PIDS="$(cat "$pidfile") $STARTED_PIDS"
    fi
  done
  for _ in $(seq 100); do virsh -c qemu:///system uri >/dev/null 2>&1 && break; sleep 0.2; done
  virsh -c qemu:///system uri >/dev/null || { echo "error: libvirtd does not answer" >&2; exit 1; }
fi
step_done libvirtd

# 3. the local box
STEP=box
PY=python3
[ -x "$CHECKOUT/.venv/bin/python" ] && PY="$CHECKOUT/.venv/bin/python"
if [ "$rebuild" = 1 ] || ! vagrant box list 2>/dev/null | grep -q "^$BOX "; then
  log "building the box from Debian packages (debootstrap: several minutes)"
  force=""; [ "$rebuild" = 1 ] && force=--force
  boxfile=$(cd "$REPO" && "$PY" -m testbed.vm.box $force)
  step_done box-build
  if vagrant box list 2>/dev/null | grep -q "^$BOX "; then
    vagrant box remove -f "$BOX" >/dev/null
  fi
  # vagrant-libvirt keeps the box's disk as a volume of the default pool: a new box needs it gone
  for vol in $(virsh -c qemu:///system vol-list default 2>/dev/null | awk '{print $1}' | grep "^${BOX//\//-VAGRANTSLASH-}_vagrant_box_image" || true); do
    virsh -c qemu:///system vol-delete --pool default "$vol" >/dev/null
  done
  vagrant box add --name "$BOX" "$boxfile"
  step_done box-add
fi

# 4. up and provision (from the copy of HEAD: its Vagrantfile, its tree synced to /vagrant)
cd "$REPO"
driver=$(ruby -e 'print File.readable?("/dev/kvm") && File.writable?("/dev/kvm") && !File.directory?("/sys/module/kvm_pvm") ? "kvm" : "qemu"')
[ -n "$substrate" ] || { [ "$driver" = kvm ] && substrate=auto || substrate=sim; }
log "commit $(git -C "$CHECKOUT" rev-parse --short HEAD); vagrant up --provider libvirt (box $BOX, driver $driver, $TESTBED_VM_CPUS CPUs, $TESTBED_VM_MEMORY_MB MiB)"
UP=1
step up
vagrant up --provider libvirt --no-provision 2>&1 | stamped
step_done up
step provision
vagrant provision 2>&1 | stamped
step_done provision

# 5. the quick start and a test subset inside; results back through /vagrant-results
step quickstart
log "the quick start inside the VM as root, substrate $substrate"
vagrant ssh -c "set -e; cd /vagrant; uname -r > /vagrant-results/guest-kernel.txt
  sudo .venv/bin/testbed run scenarios/quickstart.yaml --substrate $substrate --out /vagrant-results/quickstart --no-progress" 2>&1 | stamped
step_done quickstart
step tests
vagrant ssh -c 'set -e; cd /vagrant
  sudo .venv/bin/python -m pytest -q -p no:cacheprovider tests/unit/test_feasibility.py tests/unit/netem/test_links.py \
    tests/unit/spec/test_spec.py --junitxml=/vagrant-results/junit.xml' 2>&1 | stamped
step_done tests
[ -f "$RESULTS/quickstart/manifest.json" ] || { echo "error: the quick start's results did not come back" >&2; exit 1; }
"$PY" - "$RESULTS/junit.xml" <<'EOF'
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suite = root if root.tag == "testsuite" else root.find("testsuite")
n, bad = int(suite.get("tests")), int(suite.get("failures")) + int(suite.get("errors"))
print(f"guest tests: {n} run, {bad} failed or errored, {suite.get('skipped')} skipped")
sys.exit(0 if n > 0 and bad == 0 else 1)
EOF
log "results came back: $(ls "$RESULTS" | tr '\n' ' ')"
