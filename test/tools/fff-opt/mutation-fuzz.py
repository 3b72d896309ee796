# A bounded, seeded mutation fuzzer over the lit tests' and examples' MLIR
# (scripts/fff-fuzz.py): 2,000 mutants through 9 pass modes, from parsing
# to both pipelines. Any signal, LLVM crash banner, timeout, or pipeline
# that exits 0 with host code not fully lowered fails the test, and the
# offending mutants are left in %t with the command that reproduces them.
#
# RUN: rm -rf %t
# RUN: %python %fff_src_root/scripts/fff-fuzz.py --fff-opt=%fff_obj_root/bin/fff-opt --seed 2026 --mutants 2000 --out %t | FileCheck %s
# CHECK: fff-fuzz: seed 2026: 2000 mutants of {{[0-9]+}} corpus cases ({{[0-9]+}} over 65536 bytes left out) through 9 modes: 18000 cases in {{[0-9]+}} s, 0 failures
