# FFF_EMU_STATS=path appends one JSON object per launch to path: warp and
# thread instructions (in total and by opcode), global requests, bytes and
# 32-byte sectors (coalesced, strided and 16-byte vector accesses), unique
# bytes touched, shared-memory wavefronts and bank conflicts (conflicting,
# broadcast and vector patterns), and branches that diverged.
#
# REQUIRES: numpy
# RUN: rm -f %t.jsonl
# RUN: env FFF_EMU_STATS=%t.jsonl %python %s %emulator %t.jsonl | FileCheck %s
# CHECK: all {{[0-9]+}} checks passed

import ctypes
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from cudadriver import Driver
from emulatortest import Checks, module

driver = Driver(sys.argv[1])
stats_path = sys.argv[2]
checks = Checks()

ptx = module("""
.visible .entry traffic(.param .u64 buffer, .param .u32 stride)
{
  .reg .pred %p;
  .reg .b32 %tid, %lane, %stride, %v, %w, %x, %y;
  .reg .b64 %buffer, %address, %offset, %shared;
  .shared .align 16 .b8 words[8192];
  mov.u32 %tid, %tid.x;
  ld.param.u64 %buffer, [buffer];
  ld.param.u32 %stride, [stride];
  mul.lo.u32 %v, %tid, %stride;
  mul.wide.u32 %offset, %v, 4;
  add.s64 %address, %buffer, %offset;
  ld.global.b32 %v, [%address];
  mul.wide.u32 %offset, %tid, 16;
  add.s64 %address, %buffer, %offset;
  ld.global.v4.b32 {%v, %w, %x, %y}, [%address];
  st.global.b32 [%address], %v;
  // Each warp uses its own 4096 bytes of shared memory.
  mov.u32 %lane, %laneid;
  shr.u32 %x, %tid, 5;
  mul.wide.u32 %offset, %x, 4096;
  mov.u64 %shared, words;
  add.s64 %shared, %shared, %offset;
  mul.lo.u32 %v, %lane, %stride;
  mul.wide.u32 %offset, %v, 4;
  add.s64 %address, %shared, %offset;
  st.shared.b32 [%address], %tid;
  ld.shared.b32 %v, [%shared];
  mul.wide.u32 %offset, %lane, 16;
  add.s64 %address, %shared, %offset;
  st.shared.v4.b32 [%address], {%v, %v, %v, %v};
  and.b32 %v, %tid, 1;
  setp.eq.u32 %p, %v, 0;
  @%p bra EVEN;
  add.u32 %w, %w, 1;
EVEN:
  ret;
}""")
function = driver.function(driver.load(ptx), "traffic")
buffer = driver.alloc(64 * 1024)
for stride in (1, 32):
    driver.launch(function, (2,), (64,), ctypes.c_uint64(buffer), ctypes.c_uint32(stride))

with open(stats_path) as f:
    launches = [json.loads(line) for line in f]
checks.check(len(launches) == 2, f"{len(launches)} lines for 2 launches")
contiguous, strided = launches
warps = 4  # 2 blocks of 2 warps
for launch in launches:
    checks.check(launch["kernel"] == "traffic" and launch["grid"] == [2, 1, 1] and launch["block"] == [64, 1, 1],
                 f"launch geometry: {launch}")
    opcodes = launch["opcodes"]
    checks.check(opcodes["ld.global.b32"] == warps and opcodes["ld.param.u64"] == warps and
                 opcodes["add.u32"] == warps and opcodes["ret"] == warps, f"warp instructions by opcode: {opcodes}")
    # 29 instructions a warp; the branch is taken, and add.u32 runs, in half
    # of the lanes: thread instructions count the lanes whose guard holds.
    checks.check(launch["warp_instructions"] == 29 * warps, f"warp instructions: {launch['warp_instructions']}")
    checks.check(launch["thread_instructions"] == (29 * 32 - 16 - 16) * warps,
                 f"thread instructions: {launch['thread_instructions']}")
    checks.check(launch["branches"] == warps and launch["divergent_branches"] == warps,
                 f"branches: {launch['branches']}, divergent: {launch['divergent_branches']}")
    checks.check(launch["global_load_requests"] == 2 * warps and launch["global_store_requests"] == warps,
                 "global requests")
    checks.check(launch["global_load_bytes"] == (4 + 16) * 32 * warps and launch["global_store_bytes"] == 4 * 32 * warps,
                 f"global bytes: {launch['global_load_bytes']}, {launch['global_store_bytes']}")
    checks.check(launch["shared_load_requests"] == warps and launch["shared_store_requests"] == 2 * warps,
                 "shared requests")

# Stride 1: 128 contiguous bytes are 4 sectors; the 16-byte vectors of a warp,
# 512 bytes, are 16; the stores of 4 bytes every 16, 16 sectors.
checks.check(contiguous["global_load_sectors"] == (4 + 16) * warps, f"sectors: {contiguous['global_load_sectors']}")
checks.check(contiguous["global_store_sectors"] == 16 * warps, f"store sectors: {contiguous['global_store_sectors']}")
checks.check(contiguous["sectors_per_request"] == (4 + 16 + 16) / 3, f"{contiguous['sectors_per_request']}")
# Stride 32 words: every lane its own sector.
checks.check(strided["global_load_sectors"] == (32 + 16) * warps, f"strided sectors: {strided['global_load_sectors']}")
# Unique bytes: both blocks read the same addresses; 64 threads x 16 bytes
# cover 1024 bytes, and the strided loads (every 128 bytes, up to 8 KB) add
# the 56 words beyond them.
checks.check(contiguous["global_unique_bytes"] == 1024, f"unique bytes: {contiguous['global_unique_bytes']}")
checks.check(strided["global_unique_bytes"] == 1024 + 4 * 56,
             f"strided unique bytes: {strided['global_unique_bytes']}")
# Shared: stride 1 is conflict-free, the broadcast read too, and 16-byte
# vectors take 4 phases of one wavefront; stride 32 puts a warp's 32 words in
# one bank: 32 wavefronts, 31 conflicts.
checks.check(contiguous["shared_bank_conflicts"] == 0 and contiguous["shared_wavefronts"] == (1 + 1 + 4) * warps,
             f"stride 1: {contiguous['shared_wavefronts']} wavefronts, {contiguous['shared_bank_conflicts']} conflicts")
checks.check(strided["shared_bank_conflicts"] == 31 * warps and strided["shared_wavefronts"] == (32 + 1 + 4) * warps,
             f"stride 32: {strided['shared_wavefronts']} wavefronts, {strided['shared_bank_conflicts']} conflicts")

checks.finish()
