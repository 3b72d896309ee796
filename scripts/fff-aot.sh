#!/usr/bin/env bash
# Ahead-of-time compiles a module into a self-contained shared library.
#
#   scripts/fff-aot.sh [--target cuda|cpu] IN.mlir OUT.so [pipeline options]
#
# --target cuda (the default): --fff-gpu-pipeline (options such as
# chip=sm_90); kernels as PTX, JIT-compiled by the CUDA driver when the
# library loads, host code as native x86-64, and fff's CUDA runtime linked
# in. Arguments are device buffers.
#
# --target cpu: --fff-cpu-pipeline with out-params (options such as
# threads=1 or vector-bits=256); native code for this machine's CPU (its
# vector width, unless vector-bits says otherwise). Arguments are host
# buffers. Unless threads=1, the library runs norms and tree layers on the
# threads of fff's async runtime, which it carries.
#
# Each public function of IN takes its buffers in MLIR's memref ABI
# (docs/GPU.md): per memref, the allocated and aligned pointers, the offset,
# the sizes and the strides; results are trailing out-parameters. It checks
# them before computing anything and reports what is wrong through
# fffGetLastError(). The library exports only those functions,
# fffGetLastError and (for CUDA) fffSetStream.
set -euo pipefail
target=cuda
if [ "${1:-}" = --target ]; then
  target=${2:-}
  shift 2 || true
fi
case $target in
  cuda|cpu) ;;
  *) echo "$0: unknown target '$target': expected cuda or cpu" >&2; exit 2 ;;
esac
[ $# -ge 2 ] || { echo "usage: $0 [--target cuda|cpu] IN.mlir OUT.so [pipeline options]" >&2; exit 2; }
in=$1 out=$2 options=${3:-}
# Installed, the tools are beside this script and the runtimes in ../lib;
# in the source tree, both are in build/.
here=$(cd "$(dirname "$0")" && pwd)
if [ -x "$here/fff-opt" ]; then
  bin="$here" lib="$here/../lib"
else
  bin="$here/../build/bin" lib="$here/../build/lib"
fi
llvm=/usr/lib/llvm-22/bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ "$target" = cuda ]; then
  "$bin/fff-opt" "$in" --fff-gpu-pipeline${options:+="$options"} -o "$work/lowered.mlir"
  runtime_api="fffGetLastError fffSetStream"
  runtimes=("$lib/libfff_cuda_runtime.a" "$lib/libfff_runtime.a" -ldl)
  cpu=()
else
  "$bin/fff-opt" "$in" --fff-cpu-pipeline="out-params${options:+ $options}" -o "$work/lowered.mlir"
  runtime_api="fffGetLastError"
  # fff_runtime holds the async runtime (threads); MLIR's runner utilities
  # (memrefCopy) are a shared library of Debian's MLIR, found where it was
  # at build time.
  runtimes=("$lib/libfff_runtime.a" -L"$llvm/../lib" -Wl,-rpath,"$llvm/../lib"
            -lmlir_c_runner_utils -pthread)
  # This CPU's name and its features, as MLIR's JIT takes them. The name
  # alone (llc's "Host CPU") can stand for fewer features than the CPU has:
  # on a Sapphire Rapids VM it reads rocketlake, and bf16 norms built for
  # it narrowed their results an element at a time, 3x slower.
  cpu=(-mcpu=native)
fi
"$bin/fff-translate" --mlir-to-llvmir "$work/lowered.mlir" -o "$work/module.ll"
if [ "$target" = cpu ]; then
  # What MLIR's JIT does for fff-run: LLVM's O3 pipeline for this CPU.
  "$llvm/opt" -O3 "${cpu[@]}" "$work/module.ll" -o "$work/module.ll"
fi
"$llvm/llc" -O3 "${cpu[@]}" -relocation-model=pic -filetype=obj "$work/module.ll" -o "$work/module.o"
# The library exports the module's entry points and fff's runtime API, and
# nothing else: loaded into another program's process (PyTorch's, say), its
# runtime internals and its copy of libstdc++ must not clash with that
# program's symbols.
# The entry points are IN's public functions (fff's lowering adds helpers,
# such as the async runtime's task bodies, that stay inside).
entries=$("$bin/fff-opt" "$in" | sed -n 's/^ *func\.func @\([A-Za-z0-9_$.]*\)(.*/\1/p')
{
  echo "{ global:"
  for symbol in $entries $runtime_api; do
    echo "  $symbol;"
  done
  echo "local: *; };"
} > "$work/exports.map"
# libstdc++ goes in statically: the library must load on machines whose
# system libraries differ from the build machine's.
c++ -shared -static-libstdc++ -static-libgcc -Wl,--version-script="$work/exports.map" \
  -o "$out" "$work/module.o" "${runtimes[@]}"
