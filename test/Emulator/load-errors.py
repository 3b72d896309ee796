# What the emulator does not implement fails at load, never silently: an
# unknown opcode, modifier, type, directive, special register or target is
# CUDA_ERROR_INVALID_PTX (or the driver's more specific code), and
# cuGetErrorString, which fff's runtime prints, names it and its line. The
# JIT error log of cuModuleLoadDataEx gets the same message.
#
# RUN: %python %s %emulator 2>&1 | FileCheck %s
# CHECK: fff-emulator: CUDA_ERROR_INVALID_PTX: line 8: unknown opcode 'tanh.approx.f32'
# CHECK: all {{[0-9]+}} checks passed

import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from cudadriver import Driver
from emulatortest import HEADER, Checks

CUDA_ERROR_INVALID_IMAGE = 200
CUDA_ERROR_INVALID_PTX = 218
CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222
CUDA_ERROR_NOT_FOUND = 500

driver = Driver(sys.argv[1])
checks = Checks()


def kernel(statement, declarations=".reg .b32 %r<4>;\n.reg .b64 %rd<2>;"):
    # The statement is on line 8: the header takes three lines.
    return HEADER + f".visible .entry k()\n{{\n{declarations}\n{statement}\nret;\n}}\n"


def load(text):
    handle = ctypes.c_void_p()
    result = driver.lib.cuModuleLoadData(ctypes.byref(handle), text.encode() if isinstance(text, str) else text)
    return result, handle


def expect(text, code, message, label):
    result, _ = load(text)
    got = driver.error_string(result)
    checks.check(result == code, f"{label}: got {result} ({got}), wanted {code}")
    checks.check(got == message, f"{label}: message {got!r}, wanted {message!r}")


PTX = "CUDA_ERROR_INVALID_PTX: "
expect(kernel("tanh.approx.f32 %r1, %r2;"), CUDA_ERROR_INVALID_PTX,
       PTX + "line 8: unknown opcode 'tanh.approx.f32'", "unknown opcode")
expect(kernel("add.sat.s32 %r1, %r2, %r3;"), CUDA_ERROR_INVALID_PTX,
       PTX + "line 8: unsupported modifier '.sat' in 'add.sat.s32'", "unknown modifier")
expect(kernel("ld.global.L2.b32 %r1, [%r2];"), CUDA_ERROR_INVALID_PTX,
       PTX + "line 8: unsupported modifier '.L2' in 'ld.global.L2.b32'", "unknown cache modifier")
expect(kernel("div.approx.f32 %r1, %r2, %r3;"), CUDA_ERROR_INVALID_PTX,
       PTX + "line 8: 'div.approx.f32' is not supported: approximate forms (.approx, .full) are not",
       "approximate division")
expect(kernel("fma.f32 %r1, %r2, %r3, %r1;"), CUDA_ERROR_INVALID_PTX,
       PTX + "line 8: 'fma.f32' needs a rounding modifier (.rn, .rz, .rm or .rp)", "fma without rounding")
expect(kernel("cvt.rn.tf32.f32 %r1, %r2;"), CUDA_ERROR_INVALID_PTX,
       PTX + "line 8: 'cvt.rn.tf32.f32' needs a destination and a source type the emulator supports",
       "unknown type")
expect(kernel("mov.u32 %r1, %clock;"), CUDA_ERROR_INVALID_PTX,
       PTX + "line 8: undeclared register or unsupported special register %clock in 'mov.u32'",
       "unsupported special register")
expect(kernel("mov.u32 %r1, %x9;"), CUDA_ERROR_INVALID_PTX,
       PTX + "line 8: undeclared register or unsupported special register %x9 in 'mov.u32'", "undeclared register")
expect(kernel("add.f32 %r1, %r2, 1;"), CUDA_ERROR_INVALID_PTX,
       PTX + "line 8: integer immediate for a .f32 operand of 'add.f32'", "integer immediate for a float")
expect(kernel("bra.uni NOWHERE;"), CUDA_ERROR_INVALID_PTX, PTX + "line 8: undefined label NOWHERE", "undefined label")
expect(kernel(".local .b32 x;"), CUDA_ERROR_INVALID_PTX, PTX + "line 8: unsupported directive '.local'",
       "local memory")
expect(kernel("add.s32 %r1, %r2;"), CUDA_ERROR_INVALID_PTX, PTX + "line 8: 'add.s32' takes 3 operands, not 2",
       "operand count")
expect(kernel("prmt.b16 %r1, %r2, %r3, %r4;"), CUDA_ERROR_INVALID_PTX, PTX + "line 8: 'prmt.b16' takes .b32 only",
       "prmt of another width")
expect(kernel("prmt.b32.f4e %r1, %r2, %r3, %r4;"), CUDA_ERROR_INVALID_PTX,
       PTX + "line 8: 'prmt.b32.f4e' is not supported: only prmt's default mode is", "prmt's other modes")
expect(kernel("prmt.b32 %r1, %r2, %r3;"), CUDA_ERROR_INVALID_PTX,
       PTX + "line 8: 'prmt.b32' takes 4 operands, not 3", "prmt's operand count")
expect(kernel("shfl.bfly.b32 %r1, %r2, 1, 31;"), CUDA_ERROR_INVALID_PTX,
       PTX + "line 8: 'shfl.bfly.b32' is not supported: only shfl.sync is", "shfl without .sync")
expect(kernel("ld.b32 %r1, [%rd1];"), CUDA_ERROR_INVALID_PTX,
       PTX + "line 8: 'ld.b32' is not supported: the state space must be .global, .shared or .param",
       "generic addressing")
expect(HEADER + '.file 1 "kernel.cu"\n', CUDA_ERROR_INVALID_PTX, PTX + "line 4: unsupported directive '.file'",
       "debug directive")
expect(HEADER.replace("sm_90", "sm_100"), CUDA_ERROR_INVALID_PTX,
       PTX + "line 2: target sm_100 is newer than the emulated device (sm_90)", "newer target")
expect(HEADER.replace("8.0", "10.0"), CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
       "CUDA_ERROR_UNSUPPORTED_PTX_VERSION: line 1: PTX ISA version 10.0 is newer than the emulator's (9.x)",
       "newer PTX")
expect(b"\x7fELF\x02\x01\x01" + b"\0" * 64, CUDA_ERROR_INVALID_IMAGE,
       "CUDA_ERROR_INVALID_IMAGE: cubin and fatbin images are not supported: the emulator runs PTX text",
       "a cubin")

# The JIT error log.
log = ctypes.create_string_buffer(256)
options = (ctypes.c_int * 2)(5, 6)  # CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
values = (ctypes.c_void_p * 2)(ctypes.cast(log, ctypes.c_void_p), ctypes.c_void_p(256))
handle = ctypes.c_void_p()
result = driver.lib.cuModuleLoadDataEx(ctypes.byref(handle), kernel("tanh.approx.f32 %r1, %r2;").encode(), 2,
                                       options, values)
checks.check(result == CUDA_ERROR_INVALID_PTX and log.value == b"line 8: unknown opcode 'tanh.approx.f32'",
             f"JIT error log: {log.value!r}")
checks.check(values[1] == len(log.value), f"JIT error log size: {values[1]}")

# A good module loads; asking it for a kernel it lacks is CUDA_ERROR_NOT_FOUND.
result, handle = load(kernel("add.s32 %r1, %r2, %r3;"))
function = ctypes.c_void_p()
checks.check(result == 0, f"a valid module: {driver.error_string(result)}")
checks.check(driver.lib.cuModuleGetFunction(ctypes.byref(function), handle, b"missing") == CUDA_ERROR_NOT_FOUND,
             "a missing kernel")
checks.check(driver.lib.cuModuleGetFunction(ctypes.byref(function), handle, b"k") == 0, "a present kernel")

checks.finish()
