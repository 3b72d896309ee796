#!/usr/bin/env bash
# Ahead-of-time compiles a module for the GPU into a self-contained shared
# library: kernels as PTX (JIT-compiled by the CUDA driver when the library
# loads), host code as native x86-64, and fff's CUDA runtime linked in.
#
#   scripts/fff-aot.sh IN.mlir OUT.so [--fff-gpu-pipeline options, e.g. chip=sm_90]
#
# Each public function of IN takes device buffers in MLIR's memref ABI
# (docs/GPU.md): per memref, the allocated and aligned pointers, the offset,
# the sizes and the strides; results are trailing out-parameters. It checks
# them before launching anything and reports what is wrong through
# fffGetLastError(). The library exports only those functions,
# fffGetLastError and fffSetStream.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 IN.mlir OUT.so [pipeline options]" >&2; exit 2; }
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

"$bin/fff-opt" "$in" --fff-gpu-pipeline${options:+="$options"} -o "$work/lowered.mlir"
"$bin/fff-translate" --mlir-to-llvmir "$work/lowered.mlir" -o "$work/module.ll"
"$llvm/llc" -O3 -relocation-model=pic -filetype=obj "$work/module.ll" -o "$work/module.o"
# The library exports the module's entry points and fff's runtime API, and
# nothing else: loaded into another program's process (PyTorch's, say), its
# runtime internals and its copy of libstdc++ must not clash with that
# program's symbols.
{
  echo "{ global:"
  for symbol in $("$llvm/llvm-nm" --defined-only --extern-only --format=just-symbols "$work/module.o") \
                fffGetLastError fffSetStream; do
    echo "  $symbol;"
  done
  echo "local: *; };"
} > "$work/exports.map"
# libstdc++ goes in statically: the library must load on GPU machines whose
# system libraries differ from the build machine's.
c++ -shared -static-libstdc++ -static-libgcc -Wl,--version-script="$work/exports.map" \
  -o "$out" "$work/module.o" \
  "$lib/libfff_cuda_runtime.a" "$lib/libfff_runtime.a" -ldl
