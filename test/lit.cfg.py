# -*- Python -*-
# lit configuration for fff's regression tests.

import os
import shutil
import sys

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "FFF"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".py"]
config.excludes = ["CMakeLists.txt", "README.md", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]

config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.fff_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%fff_src_root", config.fff_src_root))
config.substitutions.append(("%fff_obj_root", config.fff_obj_root))
config.substitutions.append(("%llvm_include_dir", os.path.join(os.path.dirname(config.llvm_tools_dir), "include")))
# The interpreter running lit is build/venv's (scripts/bootstrap.sh), with
# the packages of python/requirements-dev.txt; tests run under it.
config.substitutions.append(("%python", sys.executable))

# CUDA_* tell MLIR's NVVM target where libdevice is.
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP", "CUDA_HOME", "CUDA_ROOT", "CUDA_PATH"])
llvm_config.use_default_substitutions()

tool_dirs = [config.fff_tools_dir, config.llvm_tools_dir]
tools = [ToolSubst("fff-opt", unresolved="fatal"), ToolSubst("fff-run", unresolved="fatal"),
         ToolSubst("fff-translate", unresolved="fatal"), ToolSubst("fff-minimal-driver", unresolved="fatal")]
llvm_config.add_tool_substitutions(tools, tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.fff_tools_dir, append_path=True)
# Numeric tests import their shared helpers (fffcheck.py) from test/Inputs and
# run fff-run from the build tree.
llvm_config.with_environment("PYTHONPATH", os.path.join(config.test_source_root, "Inputs"), append_path=True)
llvm_config.with_environment("FFF_RUN", os.path.join(config.fff_tools_dir, "fff-run"))
# A Python test that dies of a signal (a crash in native code) prints its
# threads' stacks, instead of output that just stops.
llvm_config.with_environment("PYTHONFAULTHANDLER", "1")

# Features for optional tools, so tests that need them are skipped cleanly.
ptxas = shutil.which("ptxas") or (
    "/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas") else None)
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
# Debian's mlir-opt (mlir-22-tools), which loads fff as a plugin.
if os.path.exists(os.path.join(config.llvm_tools_dir, "mlir-opt")):
    config.available_features.add("mlir-opt")

# This host's AVX512-BF16, which the CPU lowering rounds bf16 results with
# where the host has it.
try:
    if " avx512_bf16" in open("/proc/cpuinfo").read():
        config.available_features.add("host-avx512bf16")
except OSError:
    pass

# Optional packages, each a feature; a test that needs one is skipped, with
# this note, where it is missing.
for package in ("numpy", "torch", "pytest"):
    try:
        __import__(package)
        config.available_features.add(package)
    except ImportError:
        lit_config.note(f"{package} is not installed for {sys.executable}: tests that need it are skipped")

# fff's PTX emulator, a CUDA driver that runs kernels on the CPU (lib/Emulator).
emulator = os.path.join(config.fff_obj_root, "lib", "libfff_cuda_emulator.so")
config.substitutions.append(("%emulator", emulator))
if os.path.exists(emulator):
    config.available_features.add("emulator")

# The Python package, built where nanobind was found (python/CMakeLists.txt).
package = os.path.join(config.fff_obj_root, "python", "fff")
if "pytest" in config.available_features and os.path.exists(os.path.join(package, "__init__.py")):
    config.available_features.add("python-package")
else:
    lit_config.note("the Python package (build/python/fff) or pytest is missing: its tests are skipped")
