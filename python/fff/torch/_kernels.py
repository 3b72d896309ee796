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


def run_rows(placement, text, entry, x, operands, dout):
    """Calls @`entry` of the module `text`, compiled for `placement`, on
    x's rows (leading dims flattened) and `operands`; gives its result
    [rows, dout] x's leading dims back."""
    function = getattr(executable(text, placement.target, placement.options), entry)
    rows = x.reshape(-1, x.shape[-1])
    (y,) = placement.call(function, [rows, *operands], [[rows.shape[0], dout]])
    return y.reshape(*x.shape[:-1], dout)


def _tree_grad_text(element, din, trees, nodes, dout, depth, activation, bias_in, bias_out):
    """@grad(dy, x, w_in[, b_in], w_out) -> (dx, dw_in, dw_out[, db_in][, db_out])."""
    dyt, xt = tensor_type((None, dout), element), tensor_type((None, din), element)
    wit, wot = tensor_type((trees, nodes, din), element), tensor_type((trees, nodes, dout), element)
    bit, bot = tensor_type((trees, nodes), element), tensor_type((dout,), element)
    params = [f"%dy: {dyt}", f"%x: {xt}", f"%wi: {wit}"] + ([f"%bi: {bit}"] if bias_in else []) + [f"%wo: {wot}"]
    results = ["%dx", "%dwi", "%dwo"] + (["%dbi"] if bias_in else []) + (["%dbo"] if bias_out else [])
    types = [xt, wit, wot] + ([bit] if bias_in else []) + ([bot] if bias_out else [])
    w_in = "%wi" + (f" bias(%bi : {bit})" if bias_in else "")
    op = (f"fff.tree_ffn_grad %dy, %x, {w_in}, %wo{' bias_grad' if bias_out else ''} "
          f"{{depth = {depth} : i64, activation = #fff.activation<{activation}>}} : {dyt}, {xt}, {wit}, {wot}")
    return (f"func.func @grad({', '.join(params)}) -> ({', '.join(types)}) {{\n"
            f"  {', '.join(results)} = {op}\n"
            f"  return {', '.join(results)} : {', '.join(types)}\n}}\n")


def takes_tree_grad(x):
    """Whether fff's tree_ffn_grad kernel takes a gradient of x's rows: CPU
    and CUDA tensors of f32, f16 or bf16 (others run in torch ops)."""
    return x.device.type in ("cpu", "cuda") and x.dtype in ELEMENT


def tree_ffn_grad(dy, x, w_in, b_in, w_out, b_out, depth, activation, placement):
    """(dx, dw_in, db_in, dw_out, db_out) of fff::tree_ffn on fff's
    tree_ffn_grad kernel, compiled for and run at `placement`; None for an
    absent bias."""
    trees, nodes, din = w_in.shape
    dout = w_out.shape[2]
    text = _tree_grad_text(ELEMENT[x.dtype], din, trees, nodes, dout, depth, activation,
                           b_in is not None, b_out is not None)
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
