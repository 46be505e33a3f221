# shellcheck shell=bash
# Test legs: which Home Assistant runs on which Python, and how to get that Python.
#
# Sourced by scripts/test, scripts/develop and scripts/bench. A leg runs either with a
# suitable interpreter found on PATH, or inside a cached Debian root filesystem
# (debootstrap) entered through a private mount namespace, so nothing stays mounted.

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/langgraph_conversation
# The legs, one line each: name, Home Assistant, Python minor, lowest Python patch it
# accepts, the Debian suite whose root filesystem provides that Python. A leg's test
# requirements are requirements_test_<name>.txt. Adding a release: one line here, its
# requirement file, and its name in LEGS once it passes.
LEG_TABLE=(
    "2026.2   2026.2.3   3.13 3.13.2 trixie"
    "2026.10  2026.10.4  3.14 3.14.2 sid"
    "2026.11  2026.11.0  3.14 3.14.2 sid"
)
# The legs scripts/test runs by default.
LEGS=(2026.2 2026.10 2026.11)

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 2; }

# leg_param LEG KEY -> value (KEY: ha, python, python_min, suite, requirements)
leg_param() {
    local row name ha python python_min suite
    for row in "${LEG_TABLE[@]}"; do
        read -r name ha python python_min suite <<<"$row"
        [ "$name" = "$1" ] || continue
        case "$2" in
            ha) echo "$ha" ;;
            python) echo "$python" ;;
            python_min) echo "$python_min" ;;
            suite) echo "$suite" ;;
            requirements) echo "requirements_test_$name.txt" ;;
            *) die "unknown leg parameter $1:$2" ;;
        esac
        return 0
    done
    die "unknown leg $1 (legs: ${LEG_TABLE[*]%% *})"
}

# Hash of everything that decides a leg's virtualenv: a change rebuilds that leg.
leg_hash() {
    local leg=$1
    cat "$REPO_ROOT/requirements_test.txt" \
        "$REPO_ROOT/$(leg_param "$leg" requirements)" \
        "$REPO_ROOT/custom_components/langgraph_conversation/manifest.json" \
        "$REPO_ROOT/scripts/lib/leg_venv.sh" |
        sha256sum | cut -c1-16
}

# Prints the path of a host interpreter for the leg, or nothing.
host_python() {
    local leg=$1 minor min candidate
    minor=$(leg_param "$leg" python)
    min=$(leg_param "$leg" python_min)
    for candidate in "python$minor" "python3"; do
        command -v "$candidate" >/dev/null 2>&1 || continue
        if "$candidate" - "$minor" "$min" <<'PY' 2>/dev/null; then
import sys, venv  # noqa: F401  (venv must be importable, Debian splits it out)
minor, minimum = sys.argv[1], tuple(int(p) for p in sys.argv[2].split("."))
ok = "%d.%d" % sys.version_info[:2] == minor and sys.version_info[:3] >= minimum
sys.exit(0 if ok else 1)
PY
            command -v "$candidate"
            return 0
        fi
    done
    return 0
}

# The Debian mirror this machine already uses (never written into the repository).
debian_mirror() {
    local uri=""
    if [ -r /etc/apt/sources.list.d/debian.sources ]; then
        uri=$(awk '/^URIs:/ {for (i = 2; i <= NF; i++) if ($i !~ /security/) {print $i; exit}}' \
            /etc/apt/sources.list.d/debian.sources)
    fi
    if [ -z "$uri" ] && [ -r /etc/apt/sources.list ]; then
        uri=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' \
            /etc/apt/sources.list)
    fi
    [ -n "$uri" ] || die "no Debian mirror found in this machine's apt sources"
    echo "$uri"
}

# Installs debootstrap (once per machine). The legs that scripts/test runs side by side
# all need it on a fresh machine: without a lock, two apt-gets meet on apt's own lock and
# the second fails at once. Another apt on the machine (its own provisioning, say) may
# hold that lock too, so apt waits for it and a failure is tried again a few times.
ensure_debootstrap() {
    command -v debootstrap >/dev/null && return 0
    exec 6>"$CACHE_ROOT/.apt.lock"
    flock 6
    local attempt
    for attempt in 1 2 3 4 5; do
        command -v debootstrap >/dev/null && break
        log "installing debootstrap (attempt $attempt of 5)"
        apt-get -o DPkg::Lock::Timeout=120 update -qq >/dev/null &&
            DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 \
                install -y -qq debootstrap >/dev/null && break
        [ "$attempt" = 5 ] || { log "apt is busy or failed; trying again in 10 s"; sleep 10; }
    done
    exec 6>&-
    command -v debootstrap >/dev/null
}

rootfs_dir() { echo "$CACHE_ROOT/rootfs-$(leg_param "$1" suite)"; }

# Builds (once) a minimal Debian root filesystem holding the leg's Python.
ensure_rootfs() {
    local leg=$1 suite minor rootfs mirror packages marker
    suite=$(leg_param "$leg" suite)
    minor=$(leg_param "$leg" python)
    rootfs=$(rootfs_dir "$leg")
    # A compiler and headers: a few test dependencies (pymicro-vad) ship only sources.
    packages="python$minor,python$minor-venv,python$minor-dev,g++,ca-certificates"
    marker="$rootfs/.lgc-ready-$(echo "$packages" | sha256sum | cut -c1-12)"
    if [ -f "$marker" ]; then
        return 0
    fi
    [ "$(id -u)" = 0 ] || die "leg $leg needs Python $minor (>= $(leg_param "$leg" python_min)); install python$minor or run as root on Debian/Ubuntu so scripts/test can build one"
    command -v apt-get >/dev/null || die "leg $leg needs Python $minor; install python$minor (no apt-get here to build one)"
    mkdir -p "$CACHE_ROOT"
    ensure_debootstrap || die "could not install debootstrap; install python$minor instead"
    mirror=$(debian_mirror)
    # Two runs (two checkouts, say) needing the same root filesystem build it once: the
    # second waits for the first and then finds it ready.
    exec 8>"$CACHE_ROOT/.rootfs-$suite.lock"
    flock 8
    if [ -f "$marker" ]; then
        exec 8>&-
        return 0
    fi
    # A debootstrap that died leaves its mounts (proc, sys, dev) inside the tree.
    local mounted
    mounted=$(awk -v root="$rootfs/" 'index($2, root) == 1 {print $2}' /proc/mounts | sort -r)
    for mounted in $mounted; do umount -l "$mounted" 2>/dev/null || true; done
    rm -rf "$rootfs"
    log "building a Debian $suite root filesystem for Python $minor in $rootfs"
    local keyring=()
    [ -r /usr/share/keyrings/debian-archive-keyring.gpg ] &&
        keyring=(--keyring=/usr/share/keyrings/debian-archive-keyring.gpg)
    debootstrap --variant=minbase "${keyring[@]}" \
        --include="$packages" \
        "$suite" "$rootfs" "$mirror" >"$CACHE_ROOT/debootstrap-$suite.log" 2>&1 ||
        die "debootstrap $suite failed, see $CACHE_ROOT/debootstrap-$suite.log"
    mkdir -p "$rootfs/repo" "$rootfs/shared" "$rootfs/opt/lgc"
    touch "$marker"
    exec 8>&-
}

# Debian packages the tests use beyond Python, by suite: PostgreSQL (and its pgvector
# build) for the storage tests, started by the test session itself; on sid also
# llama.cpp-tools, whose llama-server is the real local model server of scripts/e2e and
# scripts/bench. Installed with apt-get into the existing root (a change here adds
# packages; it never rebuilds the root or the virtualenvs inside it).
rootfs_extra_packages() {
    case "$1" in
        trixie) echo "postgresql-17 postgresql-17-pgvector" ;;
        sid) echo "postgresql-18 postgresql-18-pgvector llama.cpp-tools" ;;
    esac
}

# Installs (once per list) the suite's extra packages into the leg's root filesystem.
ensure_rootfs_extras() {
    local leg=$1 suite rootfs packages marker
    suite=$(leg_param "$leg" suite)
    rootfs=$(rootfs_dir "$leg")
    packages=$(rootfs_extra_packages "$suite")
    [ -n "$packages" ] || return 0
    marker="$rootfs/.lgc-extras-$(echo "$packages" | sha256sum | cut -c1-12)"
    [ -f "$marker" ] && return 0
    exec 8>"$CACHE_ROOT/.rootfs-$suite.lock"
    flock 8
    if [ ! -f "$marker" ]; then
        log "installing $packages into the Debian $suite root filesystem"
        # No services start inside the root (policy-rc.d says no), and no default cluster
        # is created: the tests make their own in a temporary folder.
        unshare --mount --propagation private -- /bin/bash -c '
            set -e
            rootfs=$1; shift
            mount --rbind /dev "$rootfs/dev"
            mount -t proc proc "$rootfs/proc"
            mkdir -p "$rootfs/etc/postgresql-common"
            echo "create_main_cluster = false" >"$rootfs/etc/postgresql-common/createcluster.conf"
            printf "#!/bin/sh\nexit 101\n" >"$rootfs/usr/sbin/policy-rc.d"
            chmod +x "$rootfs/usr/sbin/policy-rc.d"
            status=0
            install() {
                chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
                    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
            }
            # The mirror may be a dated snapshot whose Release file has expired:
            # debootstrap does not mind, apt-get update needs telling.
            install "$@" || {
                chroot "$rootfs" apt-get update -qq -o Acquire::Check-Valid-Until=false &&
                    install "$@"
            } || status=$?
            rm -f "$rootfs/usr/sbin/policy-rc.d"
            exit $status
        ' lgc-extras "$rootfs" $packages >"$CACHE_ROOT/extras-$suite.log" 2>&1 ||
            { exec 8>&-; die "installing $packages failed, see $CACHE_ROOT/extras-$suite.log"; }
        touch "$marker"
    fi
    exec 8>&-
}

# Copies a file into place whole (a copy then a rename): two legs entering the same root
# at once must never see the other's half-written CA bundle. The temporary name carries
# $BASHPID, not $$: legs that scripts/test --jobs runs side by side are subshells of one
# shell and share its $$.
copy_whole() {
    cp -L "$1" "$2.$BASHPID.tmp" 2>/dev/null && mv -f "$2.$BASHPID.tmp" "$2" || { rm -f "$2.$BASHPID.tmp"; return 1; }
}

# Files that must be fresh in the root filesystem at every entry.
refresh_rootfs_files() {
    local rootfs=$1 bundle
    copy_whole /etc/resolv.conf "$rootfs/etc/resolv.conf" || true
    copy_whole /etc/hosts "$rootfs/etc/hosts" || true
    # The machine's CA bundle, so pip works behind its TLS setup.
    for bundle in "${SSL_CERT_FILE:-}" /etc/ssl/certs/ca-certificates.crt; do
        if [ -n "$bundle" ] && [ -r "$bundle" ]; then
            mkdir -p "$rootfs/etc/ssl/certs"
            copy_whole "$bundle" "$rootfs/etc/ssl/certs/lgc-host-ca.crt"
            break
        fi
    done
}

# in_leg LEG CMD... : runs CMD with LGC_PYTHON set to the leg's interpreter, the
# repository at $LGC_REPO and the cache at $LGC_CACHE (host paths, or the chroot's).
in_leg() {
    local leg=$1
    shift
    local py
    py=$(host_python "$leg")
    if [ -n "$py" ] && [ -z "${LGC_FORCE_ROOTFS:-}" ]; then
        (cd "$REPO_ROOT" && LGC_PYTHON=$py LGC_REPO=$REPO_ROOT LGC_CACHE=$CACHE_ROOT/host LGC_LEG=$leg "$@")
        return $?
    fi
    ensure_rootfs "$leg"
    ensure_rootfs_extras "$leg"
    local rootfs shared_dir
    rootfs=$(rootfs_dir "$leg")
    refresh_rootfs_files "$rootfs"
    shared_dir=$(cd "$REPO_ROOT/.." && pwd)/shared
    local -a passthrough=()
    local name
    for name in LANGGRAPH_MODEL LANGGRAPH_API_KEY LANGGRAPH_API_BASE LGC_PYTEST_ARGS LGC_DEVELOP_PORT \
        LGC_LOCAL_MODEL LGC_COVERAGE CI TERM; do
        [ -n "${!name:-}" ] && passthrough+=("$name=${!name}")
    done
    # A private mount namespace: every mount below disappears with the last process.
    unshare --mount --propagation private -- /bin/bash -c '
        set -e
        rootfs=$1; repo=$2; shared=$3; shift 3
        mount --rbind /dev "$rootfs/dev"
        mount -t proc proc "$rootfs/proc"
        mount -t sysfs sys "$rootfs/sys" 2>/dev/null || true
        mount -t tmpfs -o size=4g tmpfs "$rootfs/tmp"
        mount -t tmpfs tmpfs "$rootfs/dev/shm" 2>/dev/null || true
        mount --bind "$repo" "$rootfs/repo"
        if [ -d "$shared" ]; then mount --bind -o ro "$shared" "$rootfs/shared" 2>/dev/null || true; fi
        exec chroot "$rootfs" "$@"
    ' lgc-leg "$rootfs" "$REPO_ROOT" "$shared_dir" \
        /usr/bin/env -i HOME=/root LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin \
        SSL_CERT_FILE=/etc/ssl/certs/lgc-host-ca.crt PIP_CERT=/etc/ssl/certs/lgc-host-ca.crt \
        REQUESTS_CA_BUNDLE=/etc/ssl/certs/lgc-host-ca.crt \
        LGC_PYTHON="/usr/bin/python$(leg_param "$leg" python)" LGC_REPO=/repo LGC_CACHE=/opt/lgc \
        LGC_LEG="$leg" LGC_POSTGRES_REQUIRED=1 "${passthrough[@]}" /bin/bash -c 'cd /repo && exec "$@"' lgc-leg "$@"
}
