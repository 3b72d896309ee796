# Every kernel fff generates loads in the emulator: a representative set of
# modules (the three norm strategies in f32, f16 and bf16, odd, large and
# dynamic row sizes, the norms' and tree_ffn's backward kernels, a fused pre-LN unit, tree_ffn's latency and throughput
# kernels across widths, tails, several trees and every activation, and
# leaf_tree_ffn) is lowered with fff-opt --fff-gpu-pipeline, extracted with
# fff-translate --fff-extract-ptx, loaded through cuModuleLoadData, and
# every .entry is looked up with cuModuleGetFunction. The set must use every
# opcode of fff's PTX inventory, so that new codegen cannot outrun the
# emulator unnoticed: an opcode the emulator does not know fails the load.
#
# RUN: %python %s %emulator fff-opt fff-translate | FileCheck %s
# CHECK: loaded {{[0-9]+}} kernels using {{[0-9]+}} distinct opcodes
# CHECK: all {{[0-9]+}} checks passed

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from cudadriver import CudaError, Driver
from emulatortest import Checks
from fffcheck import tree_ffn_grad_function

emulator, fff_opt, fff_translate = sys.argv[1:]
driver = Driver(emulator)
checks = Checks()

# The opcodes of the PTX fff emitted when the emulator was written.
INVENTORY = """
fma.rn.f32 cvt.f32.bf16 mov.b32 add.rn.f32 cvt.f32.f16 add.s64 mul.rn.f32 selp.f32 shfl.sync.bfly.b32
ld.global.v4.b32 shl.b64 sub.rn.f32 ld.param.b64 or.b64 cvta.to.global.u64 mul.wide.s32 mov.b64 bra
ld.global.b16 ld.shared.v4.b32 setp.lt.f32 cvt.rn.bf16x2.f32 st.global.v4.b32 mov.u32 cvt.rn.f16x2.f32
neg.f32 mul.wide.u32 ld.global.b32 cvt.u64.u32 st.shared.b32 mul.lo.s64 max.NaN.f32 setp.ne.b64 shr.u64
and.b64 or.b32 div.rn.f32 selp.b64 setp.ltu.f32 ret setp.gt.f32 ld.shared.b32 mad.lo.s64 setp.ge.u64
bra.uni setp.lt.u64 rcp.rn.f32 st.shared.v4.b32 ld.shared.v2.b32 bar.sync cvt.u32.u64 st.shared.v2.b32
mov.pred st.global.b32 min.u64 setp.lt.s64 ld.shared.b16 setp.ge.s64 sqrt.rn.f32 cvt.rn.f32.u64
setp.eq.b64 cvt.rn.bf16.f32 st.global.b16 shr.u16 ld.global.v4.b16 mul.lo.s16 setp.gt.u64 setp.ge.f32
sub.s16 add.s16 and.b32 cvt.rn.f16.f32 mul.hi.u16 setp.ne.b32 cvt.u64.u16 and.b16 add.rn.bf16x2 shl.b32
st.shared.b16 mul.wide.u16 cvt.u32.u16 cvt.u16.u32 cvt.s64.s32 shr.s64 setp.le.u64 mov.b16 cvt.u16.u64
st.global.v2.b32 setp.le.f32 cvt.rzi.s32.f32 cvt.rmi.f32.f32 add.s32 abs.f32 not.pred setp.le.s64
add.rn.bf16
""".split()

functions = []


def norms(dtype, hidden):
    t = f"tensor<?x{hidden or '?'}x{dtype}>"
    g = f"tensor<{hidden}x{dtype}>"
    i = len(functions)
    if not hidden:
        functions.append(f"func.func @n{i}(%x: {t}) -> {t} {{\n  %y = fff.layer_norm %x : {t}\n  return %y : {t}\n}}")
        return
    functions.append(f"func.func @n{i}(%x: {t}, %g: {g}, %b: {g}) -> ({t}, tensor<?x1xf32>, tensor<?x1xf32>) {{\n"
                     f"  %y, %m, %r = fff.layer_norm %x scale(%g : {g}) bias(%b : {g}) return_stats : {t}\n"
                     f"  return %y, %m, %r : {t}, tensor<?x1xf32>, tensor<?x1xf32>\n}}")
    functions.append(f"func.func @r{i}(%x: {t}, %g: {g}) -> {t} {{\n"
                     f"  %y = fff.rms_norm %x scale(%g : {g}) : {t}\n  return %y : {t}\n}}")


def norm_grads(dtype, hidden):
    t = f"tensor<?x{hidden or '?'}x{dtype}>"
    g = f"tensor<{hidden or '?'}x{dtype}>"
    s = "tensor<?x1xf32>"
    i = len(functions)
    functions.append(f"func.func @g{i}(%dy: {t}, %x: {t}, %m: {s}, %r: {s}, %g: {g}) -> ({t}, {g}, {g}, {t}, {g}) {{\n"
                     f"  %dx, %dg, %db = fff.layer_norm_grad %dy, %x, %m, %r scale(%g : {g}) bias_grad : {t}, {s}\n"
                     f"  %rdx, %rdg = fff.rms_norm_grad %dy, %x scale(%g : {g}) : {t}\n"
                     f"  return %dx, %dg, %db, %rdx, %rdg : {t}, {g}, {g}, {t}, {g}\n}}")


def tree_ffn(dtype, din, dout, depth, trees=1, activation="gelu", biases=True):
    nodes = 2 ** (depth + 1) - 1
    width = "?" if din is None else din
    x, y = f"tensor<?x{width}x{dtype}>", f"tensor<?x{dout}x{dtype}>"
    wi, wo = f"tensor<{trees}x{nodes}x{width}x{dtype}>", f"tensor<{trees}x{nodes}x{dout}x{dtype}>"
    bi, bo = f"tensor<{trees}x{nodes}x{dtype}>", f"tensor<{dout}x{dtype}>"
    attrs = f"{{depth = {depth} : i64, activation = #fff.activation<{activation}>}}"
    i = len(functions)
    if biases:
        functions.append(f"func.func @t{i}(%x: {x}, %wi: {wi}, %bi: {bi}, %wo: {wo}, %bo: {bo}) -> {y} {{\n"
                         f"  %y = fff.tree_ffn %x, %wi bias(%bi : {bi}), %wo bias(%bo : {bo}) {attrs} : "
                         f"{x}, {wi}, {wo}\n  return %y : {y}\n}}")
    else:
        functions.append(f"func.func @t{i}(%x: {x}, %wi: {wi}, %wo: {wo}) -> {y} {{\n"
                         f"  %y = fff.tree_ffn %x, %wi, %wo {attrs} : {x}, {wi}, {wo}\n  return %y : {y}\n}}")


def leaf_tree_ffn(dtype, din, width, dout, depth, activation="relu"):
    leaves, nodes = 2**depth, 2**depth - 1
    x, y = f"tensor<?x{din}x{dtype}>", f"tensor<?x{dout}x{dtype}>"
    types = [f"tensor<{nodes}x{din}x{dtype}>", f"tensor<{nodes}x{dtype}>", f"tensor<{leaves}x{din}x{width}x{dtype}>",
             f"tensor<{leaves}x{width}x{dtype}>", f"tensor<{leaves}x{width}x{dout}x{dtype}>",
             f"tensor<{leaves}x{dout}x{dtype}>"]
    names = ["nw", "nb", "w1", "b1", "w2", "b2"]
    arguments = ", ".join(f"%{n}: {t}" for n, t in zip(names, types))
    functions.append(f"func.func @l{len(functions)}(%x: {x}, {arguments}) -> {y} {{\n"
                     f"  %y = fff.leaf_tree_ffn %x, {', '.join('%' + n for n in names)} "
                     f"{{depth = {depth} : i64, activation = #fff.activation<{activation}>}} : "
                     f"{x}, {', '.join(types)}\n  return %y : {y}\n}}")


for dtype in ("f32", "f16", "bf16"):
    for hidden in (3, 768, 1000, 4096, 20000):
        norms(dtype, hidden)
norms("bf16", None)
# The norms' backward: every strategy, in each type.
for dtype in ("f32", "f16", "bf16"):
    for hidden in (3, 512, 4096, 20000):
        norm_grads(dtype, hidden)
norm_grads("bf16", None)
# A pre-LN step: residual add, LayerNorm, shift and ReLU, one fused kernel.
functions.append("""func.func @pre_ln(%x: tensor<?x768xbf16>, %res: tensor<?x768xbf16>, %g: tensor<768xbf16>,
                    %b: tensor<768xbf16>, %shift: tensor<768xbf16>) -> (tensor<?x768xbf16>, tensor<?x768xbf16>) {
  %s = arith.addf %x, %res : tensor<?x768xbf16>
  %n = fff.layer_norm %s scale(%g : tensor<768xbf16>) bias(%b : tensor<768xbf16>) : tensor<?x768xbf16>
  %c0 = arith.constant 0 : index
  %d = tensor.dim %x, %c0 : tensor<?x768xbf16>
  %e = tensor.empty(%d) : tensor<?x768xbf16>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%n, %shift : tensor<?x768xbf16>, tensor<768xbf16>) outs(%e : tensor<?x768xbf16>) {
  ^bb0(%a: bf16, %sh: bf16, %o: bf16):
    %af = arith.extf %a : bf16 to f32
    %sf = arith.extf %sh : bf16 to f32
    %t = arith.addf %af, %sf : f32
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %t, %zero : f32
    %rb = arith.truncf %r : f32 to bf16
    linalg.yield %rb : bf16
  } -> tensor<?x768xbf16>
  return %s, %y : tensor<?x768xbf16>, tensor<?x768xbf16>
}""")
for din, dout in ((768, 768), (1000, 333), (4096, 1024), (17, 33)):
    tree_ffn("bf16", din, dout, depth=11)
tree_ffn("f16", 1024, 4096, depth=11)
tree_ffn("f32", 768, 768, depth=0)
tree_ffn("bf16", 256, 256, depth=5, trees=3)
tree_ffn("f32", None, 64, depth=4)
for activation in ("gelu", "gelu_tanh", "relu", "silu", "identity"):
    tree_ffn("bf16", 512, 512, depth=7, activation=activation, biases=activation != "relu")
leaf_tree_ffn("bf16", 100, 3, 36, depth=3, activation="gelu")
leaf_tree_ffn("f32", 768, 32, 768, depth=8)
# tree_ffn's backward: its walk and its sort and sum kernels.
functions.append(tree_ffn_grad_function("bf16", None, 768, 768, 1, 11, "gelu", True, True, True, name="tg_bf16"))
functions.append(tree_ffn_grad_function("f32", None, 33, 20, 3, 4, "silu", True, False, False, name="tg_f32"))

lowered = subprocess.run([fff_opt, "--fff-gpu-pipeline=chip=sm_90", "-"], input="\n".join(functions),
                         capture_output=True, text=True, check=True).stdout
ptx = subprocess.run([fff_translate, "--fff-extract-ptx"], input=lowered, capture_output=True, text=True,
                     check=True).stdout

# One gpu.binary per module: the extracted text may hold several, each
# starting with its own header.
modules = re.split(r"(?m)^(?=\s*\.version)", ptx)
modules = [text for text in modules if ".entry" in text]
kernels = 0
for text in modules:
    try:
        handle = driver.load(text)
    except CudaError as error:
        checks.check(False, f"a module failed to load: {error}")
        continue
    for name in re.findall(r"\.entry (\w+)\(", text):
        try:
            driver.function(handle, name)
            kernels += 1
        except CudaError as error:
            checks.check(False, f"{name}: {error}")

used = set(re.findall(r"^\s+(?:@!?%p\d+\s+)?([a-z][\w.]*)", ptx, flags=re.M))
missing = sorted(set(INVENTORY) - used)
checks.check(not missing, f"the generated kernels no longer use {missing}: add shapes that do")
checks.check(kernels == ptx.count(".entry"), f"{kernels} of {ptx.count('.entry')} kernels loaded")
print(f"loaded {kernels} kernels using {len(used)} distinct opcodes")
checks.finish()
