#!/usr/bin/env bash
# One entry point for a fresh machine: installs what is missing, configures,
# builds, then runs either the main job or the test suite.
#
#   scripts/bootstrap.sh main   # build, then run fff-opt on examples/
#   scripts/bootstrap.sh test   # build, then run the whole lit suite
#
# Idempotent: packages already present are not touched, and an existing build
# directory is reused (ninja rebuilds only what changed). Python packages
# (python/requirements-dev.txt) go into build/venv, the interpreter the tests
# run under.
set -euo pipefail

mode=${1:-}
case "$mode" in
  main|test) ;;
  *) echo "usage: $0 main|test" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build"
venv="$build/venv"
llvm=/usr/lib/llvm-22

packages=(
  cmake g++ ninja-build ccache
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  python3 python3-venv
)

install_missing_packages() {
  local missing=()
  for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "== installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# A virtual environment of Debian's python3 with PyPI's packages: pip leaves
# the system's packages alone, and lit (so every test) runs under it.
python_environment() {
  if [ ! -x "$venv/bin/python" ]; then
    echo "== creating $venv"
    /usr/bin/python3 -m venv "$venv"
  fi
  echo "== installing python/requirements-dev.txt into $venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$root/python/requirements-dev.txt"
}

configure() {
  [ -f "$build/build.ninja" ] && return 0
  echo "== configuring $build"
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR="$llvm/lib/cmake/mlir" \
    -DLLVM_EXTERNAL_LIT="$llvm/bin/lit" \
    -DPython3_EXECUTABLE="$venv/bin/python" \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
}

run_main() {
  for example in "$root"/examples/*.mlir; do
    echo "== fff-opt ${example#"$root"/} (parse, verify, print)"
    "$build/bin/fff-opt" "$example"
  done
  echo "== fff-run examples/pre_ln_block.mlir on the CPU, against numpy"
  "$venv/bin/python" "$root/examples/run_pre_ln_block.py" --fff-run "$build/bin/fff-run"
}

install_missing_packages
python_environment
configure
echo "== building"
# Two jobs: this is a 2-core, 24 GiB machine and MLIR translation units are heavy.
ninja -C "$build" -j 2 all
case "$mode" in
  main) run_main ;;
  test) ninja -C "$build" -j 2 check-fff ;;
esac
