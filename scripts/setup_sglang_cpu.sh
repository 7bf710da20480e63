#!/usr/bin/env bash
# Build (once per machine) a separate venv with real SGLang 0.5.23 on CPU torch, for the live
# plugin tests. Cached outside the clone; a stamp holds the hash of the recipe (build_venv below,
# the requirement filter, the torchvision patch, the sgl_kernel stand-in), so a changed recipe
# rebuilds. Each run re-points the editable ppsched install at the calling clone, so the
# `sglang.srt.plugins` entry point loads this clone's code.
#
#   PPSCHED_SGLANG_VENV  venv folder (default ~/.cache/ppsched/sglang-venv)
#   PYTHON               interpreter to build it with (default python3; 3.11)
# It also installs sglang-router (SGLang's router, a prebuilt wheel) for tests/test_live_router.py:
# outside the recipe hash, so adding or upgrading it never rebuilds the venv.
# Prints the venv's python path as its last line.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${PPSCHED_SGLANG_VENV:-$HOME/.cache/ppsched/sglang-venv}"
PYTHON="${PYTHON:-python3}"
STUB_DIR="$ROOT/tests/sgl_kernel_stub/sgl_kernel"

log() { echo "[setup_sglang_cpu] $*" >&2; }

build_venv() {
    local sglang_version=0.5.23 torch_version=2.13.0 torchvision_version=0.28.0
    local pip=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
    local work
    work="$(mktemp -d)"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "${pip[@]}" install --upgrade pip packaging setuptools wheel
    echo "torch==$torch_version" > "$work/constraints.txt"
    # Only this torch: on these machines pip resolves it to the local CPU wheel.
    "${pip[@]}" install "torch==$torch_version"
    "${pip[@]}" download --no-deps "sglang==$sglang_version" -d "$work"
    "$VENV/bin/python" "$ROOT/scripts/sglang_cpu_requirements.py" "$work"/sglang-*.whl \
        > "$work/requirements.txt"
    log "$(wc -l < "$work/requirements.txt") non-CUDA requirements of sglang"
    "${pip[@]}" install -c "$work/constraints.txt" -r "$work/requirements.txt"
    "${pip[@]}" install -c "$work/constraints.txt" --no-deps "$work"/sglang-*.whl \
        "torchvision==$torchvision_version"
    "$VENV/bin/python" "$ROOT/scripts/patch_torchvision_cpu.py"
    local site
    site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    rm -rf "$site/sgl_kernel"
    cp -r "$STUB_DIR" "$site/sgl_kernel"
    find "$site/sgl_kernel" -name '__pycache__' -prune -exec rm -rf {} +
    rm -rf "$work"
}

recipe_hash() {
    { declare -f build_venv; cat "$ROOT/scripts/sglang_cpu_requirements.py" \
        "$ROOT/scripts/patch_torchvision_cpu.py" "$STUB_DIR"/*.py; } | sha256sum | cut -d' ' -f1
}

# Runs the venv's python from / in isolated mode: the clone's own ppsched.egg-info (made by
# the project's .venv) would otherwise be found through the working directory.
vpy() { (cd / && "$VENV/bin/python" -I "$@"); }

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9  # a concurrent caller waits, then finds the stamp

HASH="$(recipe_hash)"
STAMP="$VENV/.ppsched-recipe"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$HASH" && -x "$VENV/bin/python" ]]; then
    log "cached venv is current: $VENV"
else
    log "building $VENV (about 150 s, 3.5 GB)"
    build_venv
    echo "$HASH" > "$STAMP"
    log "built"
fi

ROUTER_VERSION=0.3.2
if ! vpy -c "import importlib.metadata as m, sys
sys.exit(m.version('sglang-router') != '$ROUTER_VERSION')" 2>/dev/null; then
    log "installing sglang-router==$ROUTER_VERSION"
    # Its requirements (aiohttp, fastapi, orjson, setproctitle, uvicorn) are SGLang's already.
    "$VENV/bin/python" -m pip --disable-pip-version-check -q install --no-deps \
        "sglang-router==$ROUTER_VERSION"
fi

CURRENT="$(vpy -c 'import pathlib, ppsched; print(pathlib.Path(ppsched.__file__).resolve().parents[1])' \
    2>/dev/null || true)"
if [[ "$CURRENT" != "$ROOT" ]] || ! vpy -c 'import importlib.metadata as m, sys
sys.exit(not [e for e in m.entry_points(group="sglang.srt.plugins") if e.name == "ppsched"])'; then
    log "installing ppsched (editable, no deps) from $ROOT"
    "$VENV/bin/python" -m pip --disable-pip-version-check -q install --no-deps \
        --no-build-isolation -e "$ROOT"
fi
vpy -c "import sglang, sgl_kernel, torchvision, sglang_router.launch_router, ppsched.sglang_patch" >&2
echo "$VENV/bin/python"
