"""Compiled fff modules for the tree layers' custom ops and their
gradients: MLIR text per op and shape, compiled once (the batch is dynamic)
and shared by every layer and call that needs it."""

import functools

import torch

from .._compiler import compile as _compile

ELEMENT = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def tensor_type(shape, element):
    return "tensor<" + "".join(("?" if d is None else str(d)) + "x" for d in shape) + element + ">"


@functools.lru_cache(maxsize=None)
def executable(text, target, options):
    """The compiled module of `text` for `target` (one per distinct op and
    shape), shared by every layer and call that needs it."""
    return _compile(text, target=target, **dict(options))


def release_executables():
    executable.cache_clear()


def tree_attributes(depth, activation, zero_goes_right=False):
    """The attribute dictionary of a tree_ffn or tree_ffn_grad op."""
    routing = ", zero_goes_right" if zero_goes_right else ""
    return f"{{depth = {depth} : i64, activation = #fff.activation<{activation}>{routing}}}"


def run_rows(placement, text, entry, x, operands, dout):
    """Calls @`entry` of the module `text`, compiled for `placement`, on
    x's rows (leading dims flattened) and `operands`; gives its result
    [rows, dout] x's leading dims back."""
    function = getattr(executable(text, placement.target, placement.options), entry)
    rows = x.reshape(-1, x.shape[-1])
    (y,) = placement.call(function, [rows, *operands], [[rows.shape[0], dout]])
    return y.reshape(*x.shape[:-1], dout)


def _tree_grad_text(element, din, trees, nodes, dout, depth, activation, bias_in, bias_out, zero_goes_right):
    """@grad(dy, x, w_in[, b_in], w_out) -> (dx, dw_in, dw_out[, db_in][, db_out])."""
    dyt, xt = tensor_type((None, dout), element), tensor_type((None, din), element)
    wit, wot = tensor_type((trees, nodes, din), element), tensor_type((trees, nodes, dout), element)
    bit, bot = tensor_type((trees, nodes), element), tensor_type((dout,), element)
    params = [f"%dy: {dyt}", f"%x: {xt}", f"%wi: {wit}"] + ([f"%bi: {bit}"] if bias_in else []) + [f"%wo: {wot}"]
    results = ["%dx", "%dwi", "%dwo"] + (["%dbi"] if bias_in else []) + (["%dbo"] if bias_out else [])
    types = [xt, wit, wot] + ([bit] if bias_in else []) + ([bot] if bias_out else [])
    w_in = "%wi" + (f" bias(%bi : {bit})" if bias_in else "")
    op = (f"fff.tree_ffn_grad %dy, %x, {w_in}, %wo{' bias_grad' if bias_out else ''} "
          f"{tree_attributes(depth, activation, zero_goes_right)} : {dyt}, {xt}, {wit}, {wot}")
    return (f"func.func @grad({', '.join(params)}) -> ({', '.join(types)}) {{\n"
            f"  {', '.join(results)} = {op}\n"
            f"  return {', '.join(results)} : {', '.join(types)}\n}}\n")


def takes_tree_grad(x):
    """Whether fff's tree_ffn_grad kernel takes a gradient of x's rows: CPU
    and CUDA tensors of f32, f16 or bf16 (others run in torch ops)."""
    return x.device.type in ("cpu", "cuda") and x.dtype in ELEMENT


def tree_ffn_grad(dy, x, w_in, b_in, w_out, b_out, depth, activation, placement, zero_goes_right=False):
    """(dx, dw_in, db_in, dw_out, db_out) of fff::tree_ffn on fff's
    tree_ffn_grad kernel, compiled for and run at `placement`; None for an
    absent bias."""
    trees, nodes, din = w_in.shape
    dout = w_out.shape[2]
    text = _tree_grad_text(ELEMENT[x.dtype], din, trees, nodes, dout, depth, activation,
                           b_in is not None, b_out is not None, zero_goes_right)
    rows, grad = x.reshape(-1, din), dy.reshape(-1, dout)
    operands = [t for t in (w_in, b_in, w_out) if t is not None]
    shapes = [rows.shape, w_in.shape, w_out.shape] + [w_in.shape[:2]] * (b_in is not None) + \
        [(dout,)] * (b_out is not None)
    function = executable(text, placement.target, placement.options).grad
    results = placement.call(function, [grad, rows, *operands], shapes)
    dx, dw_in, dw_out = results[:3]
    db_in = results[3] if b_in is not None else None
    db_out = results[-1] if b_out is not None else None
    return dx.reshape(x.shape), dw_in, db_in, dw_out, db_out


# Leaves whose matrix products are large enough for BLAS: at a leaf width
# past 64 the products of a leaf's rows (B / L of them) are dense matrix
# multiplications, which torch's BLAS-backed ops run faster than fff's row
# kernel once (B / L) * W passes this. Measured on 2 cores at Din = Dout =
# 768, batch 4096 (the kernel against the torch ops, f32): 1.65x-19x faster
# for every depth 2-11 at W <= 64; at W = 128, 2.4x at 64 rows a leaf but
# 0.9x at 1024; 0.36x-0.57x at W >= 256 and 1024+ rows a leaf.
_BLAS_LEAF_WORK = 64 * 256


# The widest leaf the GPU kernels take (kMaxHiddenWidth in KernelStrategy).
_GPU_MAX_LEAF_WIDTH = 64


def takes_leaf_grad(x, w1, emulate_cuda=False):
    """Whether fff's leaf_tree_ffn_grad kernel takes a gradient of x's rows
    through leaves w1 [L, Din, W], for tensors of f32, f16 or bf16: on CUDA
    and the emulator (`emulate_cuda`), leaves of up to 64 units (the GPU
    kernels' limit); on the CPU, leaves narrow enough or rows few enough for
    the kernel to beat BLAS (see _BLAS_LEAF_WORK). The others run in torch
    ops."""
    if x.dtype not in ELEMENT:
        return False
    leaves, width = w1.shape[0], w1.shape[-1]
    if emulate_cuda or x.device.type == "cuda":
        return width <= _GPU_MAX_LEAF_WIDTH
    if x.device.type != "cpu":
        return False
    rows_per_leaf = x.numel() // max(x.shape[-1], 1) / leaves
    return width <= 64 or rows_per_leaf * width <= _BLAS_LEAF_WORK


def leaf_tree_ffn_grad(dy, x, node_w, node_b, w1, b1, w2, depth, activation, placement):
    """(dx, dw1, db1, dw2, db2) of fff::leaf_tree_ffn on fff's
    leaf_tree_ffn_grad kernel, compiled for and run at `placement`."""
    element, din, (leaves, width, dout) = ELEMENT[x.dtype], x.shape[-1], w2.shape
    types = [tensor_type(shape, element) for shape in
             [(None, dout), (None, din), (leaves - 1, din), (leaves - 1,), (leaves, din, width), (leaves, width),
              (leaves, width, dout)]]
    result_types = [types[1], types[4], types[5], types[6], tensor_type((leaves, dout), element)]
    names = ["%dy", "%x", "%nw", "%nb", "%w1", "%b1", "%w2"]
    results = ", ".join(["%dx", "%dw1", "%db1", "%dw2", "%db2"])
    signature = ", ".join(f"{n}: {t}" for n, t in zip(names, types))
    text = (f"func.func @grad({signature}) -> ({', '.join(result_types)}) {{\n"
            f"  {results} = fff.leaf_tree_ffn_grad {', '.join(names)} "
            f"{{depth = {depth} : i64, activation = #fff.activation<{activation}>}} : {', '.join(types)}\n"
            f"  return {results} : {', '.join(result_types)}\n}}\n")
    rows, grad = x.reshape(-1, din), dy.reshape(-1, dout)
    function = executable(text, placement.target, placement.options).grad
    shapes = [rows.shape, w1.shape, b1.shape, w2.shape, (leaves, dout)]
    dx, dw1, db1, dw2, db2 = placement.call(function, [grad, rows, node_w, node_b, w1, b1, w2], shapes)
    return dx.reshape(x.shape), dw1, db1, dw2, db2
