# The Python package `fff` (python/), as `PYTHONPATH=build/python` gives it:
# its pytest suite (python/tests) runs fff.lower and fff.compile on both
# targets (CUDA on fff's PTX emulator) against float64 references, the
# errors, and a torch-mlir export's IR. A test whose optional package
# (torch, torch-mlir) is missing is skipped, and says why.
#
# REQUIRES: python-package
# RUN: env PYTHONPATH=%fff_obj_root/python FFF_BUILD_DIR=%fff_obj_root %python -m pytest -q -rs -p no:cacheprovider %fff_src_root/python/tests | FileCheck %s
# CHECK-NOT: {{[0-9]+ failed}}
# CHECK: {{[0-9]+ passed}}
