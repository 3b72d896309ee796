"""Helpers for fff's numeric tests: run a function through fff-run on numpy
arrays, move data between f32/f16/bf16, and compare against float64
references with stated tolerances.

The references live in each test, written independently of the lowering
(vectorised numpy in float64), never derived from fff's own code.
"""

import math
import os
import subprocess
import sys
import tempfile

import numpy as np

FFF_RUN = os.environ.get("FFF_RUN", "fff-run")
FFF_OPT = os.environ.get("FFF_OPT", "fff-opt")

# Relative-norm tolerances ||actual - expected|| / ||expected||. The kernels
# compute in f32 from the same rounded inputs, so the error is the f32
# accumulation error plus one rounding of the result to the output type.
TOLERANCE = {"f32": 2e-5, "f16": 1e-3, "bf16": 6e-3}

MLIR_TYPE = {"f32": "f32", "f16": "f16", "bf16": "bf16"}


def to_bf16_bits(values):
    """Rounds float values to bf16 (nearest even) and returns the uint16 bits."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def from_bf16_bits(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def quantize(values, dtype):
    """Returns (array to hand to fff-run, the float64 values it represents)."""
    values = np.asarray(values, dtype=np.float32)
    if dtype == "f32":
        return values, values.astype(np.float64)
    if dtype == "f16":
        half = values.astype(np.float16)
        return half, half.astype(np.float64)
    if dtype == "bf16":
        bits = to_bf16_bits(values)
        return bits, from_bf16_bits(bits).astype(np.float64)
    raise ValueError(dtype)


def dequantize(array, dtype):
    if dtype == "bf16":
        return from_bf16_bits(array).astype(np.float64)
    return np.asarray(array).astype(np.float64)


def tensor_type(shape, dtype):
    dims = "x".join("?" if d is None else str(d) for d in shape)
    return f"tensor<{dims}x{MLIR_TYPE[dtype]}>" if shape else f"tensor<{MLIR_TYPE[dtype]}>"


def run(mlir, func, args, num_results, extra_flags=(), lowering=()):
    """Runs @func of the MLIR text on `args` through fff-run; returns results.
    `lowering` is fff-opt flags applied first (e.g. to pick a GPU kernel
    variant's CPU twin)."""
    if lowering:
        proc = subprocess.run([FFF_OPT, *lowering, "-"], input=mlir, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"fff-opt {' '.join(lowering)} failed:\n{proc.stderr}\n--- input ---\n{mlir}")
        mlir = proc.stdout
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "input.mlir")
        with open(path, "w") as f:
            f.write(mlir)
        command = [FFF_RUN, path, "-e", func, *extra_flags]
        for i, arg in enumerate(args):
            arg_path = os.path.join(tmp, f"arg{i}.npy")
            np.save(arg_path, np.ascontiguousarray(arg))
            command += ["--arg", arg_path]
        outs = [os.path.join(tmp, f"out{i}.npy") for i in range(num_results)]
        for out in outs:
            command += ["--out", out]
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"fff-run failed ({proc.returncode}):\n{proc.stderr}\n--- input ---\n{mlir}")
        return [np.load(out) for out in outs]


def relative_error(actual, expected, scale=None):
    """||actual - expected|| / ||scale||, where scale defaults to expected."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    scale = np.linalg.norm(expected if scale is None else scale)
    diff = np.linalg.norm(actual - expected)
    return diff / scale if scale > 0 else diff


def norm_function(kind, dtype, hidden):
    """@f(x, g, b) -> the layer_norm (scale g, bias b) or rms_norm (scale g;
    b unused) of rows of `hidden` elements, the batch dynamic."""
    t, p = tensor_type([None, hidden], dtype), tensor_type([hidden], dtype)
    if kind == "layer_norm":
        op = f"fff.layer_norm %x scale(%g : {p}) bias(%b : {p}) : {t}"
    else:
        op = f"fff.rms_norm %x scale(%g : {p}) : {t}"
    return f"func.func @f(%x: {t}, %g: {p}, %b: {p}) -> {t} {{\n  %y = {op}\n  return %y : {t}\n}}"


def norm_rows_ref(kind, x, g, b):
    """norm_function's result in float64 (epsilon 1e-5)."""
    if kind == "layer_norm":
        centred = x - x.mean(axis=1, keepdims=True)
        return centred / np.sqrt((centred * centred).mean(axis=1, keepdims=True) + 1e-5) * g + b
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5) * g


def norm_grads_ref(kind, x, dy, g, b, eps, normalized_rank):
    """dx, dgamma, dbeta (None where absent) of torch's layer_norm or
    rms_norm over the trailing `normalized_rank` dims, by torch.autograd in
    float64."""
    import torch

    shape = x.shape[x.ndim - normalized_rank:]
    xt = torch.tensor(x, requires_grad=True)
    gt = None if g is None else torch.tensor(g, requires_grad=True)
    bt = None if b is None else torch.tensor(b, requires_grad=True)
    if kind == "layer_norm":
        y = torch.nn.functional.layer_norm(xt, shape, gt, bt, eps)
    else:
        y = torch.nn.functional.rms_norm(xt, shape, gt, eps)
    y.backward(torch.tensor(dy))
    return [None if t is None else t.grad.numpy() for t in (xt, gt, bt)]


def grad_scale(expected, floor):
    """The norm a gradient's error is measured against: the expected
    gradient's, but at least `floor`'s. A gradient that cancels in exact
    arithmetic (a row of one element: dx of a LayerNorm is 0, of an RMSNorm
    rstd * g * eps / (x^2 + eps)) is then judged against the magnitudes of
    the terms that cancel, which is all f32 arithmetic can promise."""
    return np.array([max(np.linalg.norm(expected), np.linalg.norm(floor))])


class Checker:
    """Collects comparisons; prints one line per case and fails at the end."""

    def __init__(self):
        self.failures = []
        self.count = 0

    def close(self, name, actual, expected, tolerance, scale=None):
        self.count += 1
        if np.asarray(actual).shape != np.asarray(expected).shape:
            self.failures.append(f"{name}: shape {np.shape(actual)} != {np.shape(expected)}")
            return
        error = relative_error(actual, expected, scale)
        ok = error <= tolerance and np.all(np.isfinite(actual))
        print(f"{'ok  ' if ok else 'FAIL'} {name}: relative error {error:.2e} (tolerance {tolerance:.0e})")
        if not ok:
            self.failures.append(f"{name}: relative error {error:.3e} > {tolerance:.0e}")

    def equal(self, name, actual, expected):
        self.count += 1
        ok = np.array_equal(actual, expected)
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
        if not ok:
            self.failures.append(f"{name}: {actual!r} != {expected!r}")

    def finish(self):
        if self.failures:
            sys.exit(f"{len(self.failures)} of {self.count} checks failed:\n" + "\n".join(self.failures))
        print(f"all {self.count} checks passed")


# Activations in float64, written from their definitions (on empty arrays
# too).
_erf = np.vectorize(math.erf, otypes=[np.float64])

ACTIVATIONS = {
    "gelu": lambda v: 0.5 * v * (1.0 + _erf(v / math.sqrt(2.0))),
    "gelu_tanh": lambda v: 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3))),
    "relu": lambda v: np.maximum(v, 0.0),
    "silu": lambda v: v / (1.0 + np.exp(-v)),
    "identity": lambda v: v,
}


# Tree layers in float64, a token and a node at a time, from the ops'
# definitions (docs/Dialect).
def tree_ffn_ref(x, wi, bi, wo, bo, depth, activation):
    act = ACTIVATIONS[activation]
    y = np.tile(bo, (x.shape[0], 1)).astype(np.float64)
    for row in range(x.shape[0]):
        for tree in range(wi.shape[0]):
            node = 0
            for _ in range(depth + 1):
                logit = x[row] @ wi[tree, node] + bi[tree, node]
                y[row] += act(logit) * wo[tree, node]
                node = 2 * node + 1 + (1 if logit > 0 else 0)
    return y


def leaf_tree_ffn_ref(x, nw, nb, w1, b1, w2, b2, depth, activation):
    act = ACTIVATIONS[activation]
    y = np.zeros((x.shape[0], w2.shape[2]))
    for row in range(x.shape[0]):
        node = 0
        for _ in range(depth):
            node = 2 * node + 1 + (1 if x[row] @ nw[node] + nb[node] >= 0 else 0)
        leaf = node - (2 ** depth - 1)
        y[row] = act(x[row] @ w1[leaf] + b1[leaf]) @ w2[leaf] + b2[leaf]
    return y


# The same layers vectorised over rows, level by level, returning what each
# row decided on its way as well.
def activation_slope(activation, z, step=1e-5):
    """act'(z) by central differences, not a closed form, so that the
    gradient references do not share the kernels' derivative code."""
    act = ACTIVATIONS[activation]
    return (act(z + step) - act(z - step)) / (2 * step)


def leaf_tree_ffn_grad_ref(dy, x, node_w, node_b, w1, b1, w2, depth, activation):
    """leaf_tree_ffn_grad's dx, dw1, db1, dw2, db2 in float64, a row at a
    time, from the op's definition (a score >= 0 routes right)."""
    act = ACTIVATIONS[activation]
    dx, dw1, db1, dw2 = np.zeros_like(x), np.zeros_like(w1), np.zeros_like(b1), np.zeros_like(w2)
    db2 = np.zeros((w2.shape[0], w2.shape[2]))
    for row in range(x.shape[0]):
        node = 0
        for _ in range(depth):
            node = 2 * node + 1 + (1 if x[row] @ node_w[node] + node_b[node] >= 0 else 0)
        leaf = node - (2**depth - 1)
        pre = x[row] @ w1[leaf] + b1[leaf]
        dpre = (w2[leaf] @ dy[row]) * activation_slope(activation, pre)
        dw2[leaf] += np.outer(act(pre), dy[row])
        db2[leaf] += dy[row]
        dw1[leaf] += np.outer(x[row], dpre)
        db1[leaf] += dpre
        dx[row] = w1[leaf] @ dpre
    return dx, dw1, db1, dw2, db2


def tree_ffn_paths(x, w_in, b_in, w_out, b_out, depth, activation, zero_goes_right=False):
    """tree_ffn (b_in, b_out may be None): y, the visited nodes
    [rows, trees, depth + 1] and the logits along the path, same shape. A
    logit of exactly 0 goes left, or right with `zero_goes_right`."""
    act = ACTIVATIONS[activation]
    rows, trees = x.shape[0], w_in.shape[0]
    y = np.zeros((rows, w_out.shape[2]))
    route = np.zeros((rows, trees, depth + 1), dtype=np.int64)
    logits = np.zeros((rows, trees, depth + 1))
    for k in range(trees):
        node = np.zeros(rows, dtype=np.int64)
        for level in range(depth + 1):
            logit = np.einsum("bi,bi->b", x, w_in[k, node])
            if b_in is not None:
                logit = logit + b_in[k, node]
            y += act(logit)[:, None] * w_out[k, node]
            route[:, k, level] = node
            logits[:, k, level] = logit
            node = 2 * node + 1 + ((logit >= 0) if zero_goes_right else (logit > 0))
    if b_out is not None:
        y = y + b_out
    return y, route, logits


def tree_ffn_grad_ref(dy, x, w_in, b_in, w_out, depth, activation, zero_goes_right=False):
    """tree_ffn_grad's dx, dw_in, dw_out, db_in, db_out in float64, a level
    of every row at a time."""
    act = ACTIVATIONS[activation]
    _, route, logits = tree_ffn_paths(x, w_in, b_in, w_out, None, depth, activation, zero_goes_right)
    dx, dw_in, dw_out = np.zeros_like(x), np.zeros_like(w_in), np.zeros_like(w_out)
    db_in = np.zeros(w_in.shape[:2])
    for k in range(w_in.shape[0]):
        for level in range(depth + 1):
            node, logit = route[:, k, level], logits[:, k, level]
            dl = np.einsum("bo,bo->b", dy, w_out[k, node]) * activation_slope(activation, logit)
            dx += dl[:, None] * w_in[k, node]
            np.add.at(dw_in[k], node, dl[:, None] * x)
            np.add.at(dw_out[k], node, act(logit)[:, None] * dy)
            np.add.at(db_in[k], node, dl)
    return dx, dw_in, dw_out, db_in, dy.sum(0)


def leaf_tree_ffn_paths(x, node_w, node_b, w1, b1, w2, b2, depth, activation):
    """leaf_tree_ffn: y, each row's leaf, and its routing scores
    [rows, depth]."""
    rows = x.shape[0]
    node = np.zeros(rows, dtype=np.int64)
    scores = np.zeros((rows, depth))
    for level in range(depth):
        score = np.einsum("bi,bi->b", x, node_w[node]) + node_b[node]
        scores[:, level] = score
        node = 2 * node + 1 + (score >= 0)
    leaf = node - (2**depth - 1)
    hidden = ACTIVATIONS[activation](np.einsum("bi,biw->bw", x, w1[leaf]) + b1[leaf])
    return np.einsum("bw,bwo->bo", hidden, w2[leaf]) + b2[leaf], leaf, scores


def stable_rows(x, weights, decisions):
    """Rows none of whose routing decisions ([rows, ...]) is within f32
    rounding of zero, where an f32 kernel and a float64 reference could
    legitimately branch apart."""
    margin = 1e-4 * np.linalg.norm(x, axis=1) * np.abs(weights).max() * np.sqrt(x.shape[1])
    per_row = decisions.reshape(len(x), int(np.prod(decisions.shape[1:])))
    return np.all(np.abs(per_row) > margin[:, None], axis=1)



def stable_inputs(rng, rows, din, dtype, weights, decisions_of):
    """(storage, values) of x [rows, din] whose every routing decision
    (decisions_of(x), [rows, ...]) is clear of f32 rounding of the
    `weights` that make them (unstable rows are drawn again), so that a
    kernel and a float64 reference route alike."""
    x_arr, x = quantize(rng.standard_normal((rows, din)), dtype)
    for _ in range(50):
        unstable = ~stable_rows(x, weights, decisions_of(x))
        if not unstable.any():
            return x_arr, x
        fresh_arr, fresh = quantize(rng.standard_normal((int(unstable.sum()), din)), dtype)
        x_arr, x = x_arr.copy(), x.copy()
        x_arr[unstable], x[unstable] = fresh_arr, fresh
    raise RuntimeError("no stable rows")


def stable_tree_inputs(rng, rows, din, dtype, w_in, b_in, depth):
    """stable_inputs for a tree_ffn with w_in and b_in (may be None): its
    logits along each row's paths."""
    return stable_inputs(rng, rows, din, dtype, w_in,
                         lambda x: tree_ffn_paths(x, w_in, b_in, w_in[..., :1], None, depth, "identity")[2])


def stable_leaf_inputs(rng, rows, din, dtype, node_w, node_b, depth):
    """stable_inputs for a leaf_tree_ffn with node_w and node_b: its
    routing scores."""
    leaves = 2**depth
    no_leaves = (np.zeros((leaves, din, 1)), np.zeros((leaves, 1)), np.zeros((leaves, 1, 1)), np.zeros((leaves, 1)))
    return stable_inputs(rng, rows, din, dtype, node_w,
                         lambda x: leaf_tree_ffn_paths(x, node_w, node_b, *no_leaves, depth, "identity")[2])


def random_leaf_grad_inputs(rng, dtype, rows, din, width, dout, depth):
    """leaf_tree_ffn_grad's operands (dy, x, node_w, node_b, w1, b1, w2) on
    random data scaled to O(1) scores and outputs, x's routing clear of
    rounding: as stored (for fff-run or the emulator), and as the float64
    values they hold."""
    leaves = 2**depth
    nw = quantize(rng.standard_normal((leaves - 1, din)) / np.sqrt(din), dtype)
    nb = quantize(rng.standard_normal(leaves - 1) * 0.3, dtype)
    w1 = quantize(rng.standard_normal((leaves, din, width)) / np.sqrt(din), dtype)
    b1 = quantize(rng.standard_normal((leaves, width)) * 0.3, dtype)
    w2 = quantize(rng.standard_normal((leaves, width, dout)) / np.sqrt(width), dtype)
    x = stable_leaf_inputs(rng, rows, din, dtype, nw[1], nb[1], depth)
    dy = quantize(rng.standard_normal((rows, dout)), dtype)
    operands = [dy, x, nw, nb, w1, b1, w2]
    return [stored for stored, _ in operands], [value for _, value in operands]


# A leaf tree of depth 1 (Din 4, W 3, Dout 2) and one row whose root score
# is exactly 0 (x . node_w[0] = 1 - 1, node_b = 0), which routes right: the
# row reaches leaf 1, leaf 0 gets nothing.
LEAF_TIE_WIDTHS = (4, 3, 2)


def leaf_tie_inputs(rng):
    """f32 (dy, x, node_w, node_b, w1, b1, w2) of that tie."""
    din, width, dout = LEAF_TIE_WIDTHS
    node_w = np.array([[1, -1, 0, 0]], np.float32)
    node_b = np.zeros(1, np.float32)
    w1 = rng.standard_normal((2, din, width)).astype(np.float32)
    b1 = rng.standard_normal((2, width)).astype(np.float32)
    w2 = rng.standard_normal((2, width, dout)).astype(np.float32)
    x = np.array([[0.75, 0.75, 0.5, -0.25]], np.float32)
    dy = rng.standard_normal((1, dout)).astype(np.float32)
    return [dy, x, node_w, node_b, w1, b1, w2]


def check_leaf_tie(check, label, inputs, got):
    """The tie's gradients `got` (dx, dw1, db1, dw2, db2, identity
    activation): dx the reference's, leaf 1's weights the only ones with a
    gradient."""
    want = leaf_tree_ffn_grad_ref(*(a.astype(np.float64) for a in inputs), 1, "identity")
    check.close(f"{label}: dx", got[0], want[0], 2e-5)
    check.equal(f"{label}: the right leaf gets the gradient, the left none",
                not got[1][0].any() and got[1][1].any() and np.array_equal(got[4][0], [0, 0]), True)


# Functions of one tree layer, as the numeric tests run them.
def tree_attributes(depth, activation, zero_goes_right):
    routing = ", zero_goes_right" if zero_goes_right else ""
    return f"{{depth = {depth} : i64, activation = #fff.activation<{activation}>{routing}}}"


def tree_ffn_function(dtype, rows, din, dout, trees, depth, activation, dynamic, in_bias, out_bias, name="f",
                      zero_goes_right=False):
    """@name(x, w_in[, b_in], w_out[, b_out]) -> tree_ffn; `dynamic` leaves
    the batch dynamic."""
    nodes = 2 ** (depth + 1) - 1
    xt = tensor_type((None if dynamic else rows, din), dtype)
    wit, wot = tensor_type((trees, nodes, din), dtype), tensor_type((trees, nodes, dout), dtype)
    bit, bot = tensor_type((trees, nodes), dtype), tensor_type((dout,), dtype)
    yt = tensor_type((None if dynamic else rows, dout), dtype)
    attrs = tree_attributes(depth, activation, zero_goes_right)
    params = [f"%x: {xt}", f"%wi: {wit}"] + ([f"%bi: {bit}"] if in_bias else []) + [f"%wo: {wot}"]
    params += [f"%bo: {bot}"] if out_bias else []
    w_in = "%wi" + (f" bias(%bi : {bit})" if in_bias else "")
    w_out = "%wo" + (f" bias(%bo : {bot})" if out_bias else "")
    op = f"fff.tree_ffn %x, {w_in}, {w_out} {attrs} : {xt}, {wit}, {wot}"
    return f"func.func @{name}({', '.join(params)}) -> {yt} {{\n  %y = {op}\n  return %y : {yt}\n}}"


def tree_ffn_grad_function(dtype, rows, din, dout, trees, depth, activation, dynamic, in_bias, out_bias_grad,
                           name="grad", zero_goes_right=False):
    """@name(dy, x, w_in[, b_in], w_out) -> (dx, dw_in, dw_out[, db_in][, db_out])
    of tree_ffn_grad; `dynamic` leaves the batch dynamic."""
    nodes = 2 ** (depth + 1) - 1
    batch = None if dynamic else rows
    dyt, xt = tensor_type((batch, dout), dtype), tensor_type((batch, din), dtype)
    wit, wot = tensor_type((trees, nodes, din), dtype), tensor_type((trees, nodes, dout), dtype)
    bit, bot = tensor_type((trees, nodes), dtype), tensor_type((dout,), dtype)
    params = [f"%dy: {dyt}", f"%x: {xt}", f"%wi: {wit}"] + ([f"%bi: {bit}"] if in_bias else []) + [f"%wo: {wot}"]
    results = ["%dx", "%dwi", "%dwo"] + (["%dbi"] if in_bias else []) + (["%dbo"] if out_bias_grad else [])
    types = [xt, wit, wot] + ([bit] if in_bias else []) + ([bot] if out_bias_grad else [])
    w_in = "%wi" + (f" bias(%bi : {bit})" if in_bias else "")
    attrs = tree_attributes(depth, activation, zero_goes_right)
    op = (f"fff.tree_ffn_grad %dy, %x, {w_in}, %wo{' bias_grad' if out_bias_grad else ''} {attrs} "
          f": {dyt}, {xt}, {wit}, {wot}")
    return (f"func.func @{name}({', '.join(params)}) -> ({', '.join(types)}) {{\n"
            f"  {', '.join(results)} = {op}\n"
            f"  return {', '.join(results)} : {', '.join(types)}\n}}")


def leaf_tree_ffn_function(name, dtype, rows, din, width, dout, depth, activation, dynamic):
    """@name(x, node_w, node_b, w1, b1, w2, b2) -> leaf_tree_ffn."""
    leaves = 2**depth
    types = [tensor_type((None if dynamic else rows, din), dtype),
             tensor_type((leaves - 1, din), dtype), tensor_type((leaves - 1,), dtype),
             tensor_type((leaves, din, width), dtype), tensor_type((leaves, width), dtype),
             tensor_type((leaves, width, dout), dtype), tensor_type((leaves, dout), dtype)]
    yt = tensor_type((None if dynamic else rows, dout), dtype)
    names = ["x", "nw", "nb", "w1", "b1", "w2", "b2"]
    signature = ", ".join(f"%{n}: {t}" for n, t in zip(names, types))
    operands = ", ".join(f"%{n}" for n in names)
    return (f"func.func @{name}({signature}) -> {yt} {{\n"
            f"  %y = fff.leaf_tree_ffn {operands} {{depth = {depth} : i64, activation = #fff.activation<{activation}>}}\n"
            f"         : {', '.join(types)}\n"
            f"  return %y : {yt}\n}}")


def leaf_tree_ffn_grad_function(dtype, rows, din, width, dout, depth, activation, dynamic, name="grad"):
    """@name(dy, x, node_w, node_b, w1, b1, w2) -> (dx, dw1, db1, dw2, db2)
    of leaf_tree_ffn_grad; `dynamic` leaves the batch dynamic."""
    leaves, batch = 2**depth, None if dynamic else rows
    types = [tensor_type((batch, dout), dtype), tensor_type((batch, din), dtype),
             tensor_type((leaves - 1, din), dtype), tensor_type((leaves - 1,), dtype),
             tensor_type((leaves, din, width), dtype), tensor_type((leaves, width), dtype),
             tensor_type((leaves, width, dout), dtype)]
    result_types = [types[1], types[4], types[5], types[6], tensor_type((leaves, dout), dtype)]
    names = ["dy", "x", "nw", "nb", "w1", "b1", "w2"]
    results = ["%dx", "%dw1", "%db1", "%dw2", "%db2"]
    signature = ", ".join(f"%{n}: {t}" for n, t in zip(names, types))
    operands = ", ".join(f"%{n}" for n in names)
    return (f"func.func @{name}({signature}) -> ({', '.join(result_types)}) {{\n"
            f"  {', '.join(results)} = fff.leaf_tree_ffn_grad {operands} "
            f"{{depth = {depth} : i64, activation = #fff.activation<{activation}>}}\n"
            f"         : {', '.join(types)}\n"
            f"  return {', '.join(results)} : {', '.join(result_types)}\n}}")
