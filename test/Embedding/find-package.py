# `cmake --install` gives a prefix that a downstream compiler builds against
# with find_package(FFF CONFIG) and FFF::fff alone (examples/embedding), and
# the installed tools and AOT script work from it. Before, the install held
# six static archives and nothing else.
#
# RUN: rm -rf %t && cmake --install %fff_obj_root --prefix %t/prefix > /dev/null
# RUN: test -f %t/prefix/lib/cmake/fff/FFFConfig.cmake
# RUN: test -f %t/prefix/include/fff/Dialect/FFF/IR/FFFOps.h.inc
# RUN: test -f %t/prefix/include/fff/Runtime/Runtime.h
# RUN: test -f %t/prefix/lib/libfff_cuda_runtime.a
# RUN: test -f %t/prefix/lib/libfff_cuda_emulator.so
# RUN: test -f %t/prefix/share/doc/fff/Tools.md
#
# The consumer: its whole CMake file is find_package plus
# target_link_libraries(... FFF::fff).
# RUN: cmake -G Ninja -S %fff_src_root/examples/embedding -B %t/consumer -DCMAKE_PREFIX_PATH=%t/prefix > %t/configure.log
# RUN: ninja -C %t/consumer > %t/build.log
# RUN: %t/consumer/fff-embed-example --pipeline fff-cpu-pipeline %fff_src_root/examples/pre_ln_block.mlir | FileCheck %s --check-prefix=CPU
# CPU: llvm.func @pre_ln_block
# RUN: %t/consumer/fff-embed-example --pipeline 'fff-gpu-pipeline{chip=sm_90}' %fff_src_root/test/Runtime/Inputs/rms_norm_768.mlir > %t/gpu.mlir
# RUN: %t/prefix/bin/fff-translate --fff-extract-ptx %t/gpu.mlir | FileCheck %s --check-prefix=PTX
# PTX: .entry rms_norm_bf16_768_warp_per_row
#
# The installed AOT script finds the installed tools and runtimes.
# RUN: %t/prefix/bin/fff-aot.sh %fff_src_root/test/Runtime/Inputs/rms_norm_768.mlir %t/norm.so
# RUN: nm -D --defined-only %t/norm.so | FileCheck %s --check-prefix=AOT
# AOT: T rms_norm_768
