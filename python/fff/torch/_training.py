"""Norms that train: LayerNorm and RMSNorm as custom ops with a backward,
both on fff's kernels (the CPU's, the GPU's for CUDA tensors, or the GPU's
on fff's PTX emulator with `emulate_cuda`: _devices.py), for graphs that
need gradients.

fff::layer_norm_train(x, weight, bias, normalized_ndim, eps) returns y and
the f32 mean and rstd that its backward, fff::layer_norm_train_backward
(fff.layer_norm_grad), reads: the forward's statistics are saved, not
recomputed. fff::rms_norm_train returns y alone: fff.rms_norm_grad sums
x^2 in the same pass over each row as g * x, so rstd costs the backward no
extra read and the forward no extra write.

Both are registered with torch.library's register_autograd, so that
AOTAutograd (under Inductor) traces them into the forward and backward
graphs as opaque calls, and eager autograd runs them as they are. Each
distinct (norm, dtype, normalized shape, parameters, eps) compiles once,
and is checked once against torch's own norm and its autograd on random
data before it is used."""

import collections
import threading

import numpy as np
import torch

from .._compiler import compile as _compile
from .._fff import FFFError
from ._devices import CPU, placement_of_device
from ._ops import direct_op

_MLIR = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
# How far the first call's check lets fff's results be from torch's: f32
# arithmetic in both, then one rounding to a half type (torch rounds after
# each op of its backward).
_TOLERANCE = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}

# The backward calls run so far, by fff op name, those of them that added
# the residual stream's gradient to dx, and those that applied a dropout's
# keep mask to dy; explain(backward=True) reads them around one backward.
BACKWARD_CALLS = collections.Counter()
RESIDUAL_GRAD_CALLS = collections.Counter()
DY_MASK_CALLS = collections.Counter()
_CALLS_LOCK = threading.Lock()


class Unsupported(Exception):
    """fff does not train this norm; the message says why, in one line."""


def _epsilon(eps):
    """eps as the f32 MLIR attribute of the same bits (torch computes these
    dtypes' norms in f32, with eps rounded to f32)."""
    bits = int(np.float32(eps).view(np.uint32))
    return f"{{epsilon = 0x{bits:08X} : f32}}"


def _types(dtype, normalized_shape, param_dtype=None):
    """The MLIR types of x's rows, of a parameter (of `param_dtype`, x's
    dtype by default) and of the f32 statistics."""
    element = _MLIR[dtype]
    dims = "x".join(str(d) for d in normalized_shape)
    rows = f"tensor<?x{dims}x{element}>"
    stats = "tensor<?x" + "x".join("1" for _ in normalized_shape) + "xf32>"
    return rows, f"tensor<{dims}x{_MLIR[param_dtype or dtype]}>", stats


def _mixed(dtype, param_dtype):
    """Whether a norm of x's `dtype` with parameters of `param_dtype` is a
    mixed-type one: f16 or bf16 rows, f32 parameters. torch computes it in
    f32 and rounds y, and dx, once to x's dtype (its CPU kernels, and
    F.rms_norm's composite: x widened, the f32 weight, the result
    narrowed); so does fff, widening x and dy as it reads them and
    narrowing as it writes. Raises Unsupported for any other pair of
    dtypes that differ."""
    if param_dtype == dtype:
        return False
    if dtype in (torch.float16, torch.bfloat16) and param_dtype == torch.float32:
        return True
    raise Unsupported(f"fff's norms take parameters of their input's dtype, or f32 ones for f16 and bf16 "
                      f"inputs, not {param_dtype} ones for a {dtype} input")


def _f32_literal(value):
    """`value` rounded to f32, as an MLIR hex literal of its bits."""
    return f"0x{int(np.float32(value).view(np.uint32)):08X}"


def _masked_dy(dtype, normalized_shape, dy_scale):
    """The MLIR that gives %dy_kept = dy * (keep ? dy_scale : 0) from %dy
    and %keep, as the backward graph of a dropout computes it (grad *
    (mask.to(grad's dtype) * scale)) once Inductor compiles it: in f32,
    with the scale rounded to f32, then one rounding to dy's type. A NaN or
    inf in a dropped element of dy stays one (times 0), as torch's does."""
    rows, _, _ = _types(dtype, normalized_shape)
    element = _MLIR[dtype]
    rank = 1 + len(normalized_shape)
    dims = ", ".join(f"d{i}" for i in range(rank))
    identity = f"affine_map<({dims}) -> ({dims})>"
    parallel = ", ".join('"parallel"' for _ in range(rank))
    # The mask's bytes as i8: kernels load a vector of i1 as bits, not bytes.
    keep = rows.replace(f"x{element}>", "xi8>")
    widen = f"    %wide = arith.extf %a : {element} to f32\n" if element != "f32" else ""
    wide = "%wide" if element != "f32" else "%a"
    narrow = f"    %kept = arith.truncf %product : f32 to {element}\n" if element != "f32" else ""
    kept = "%kept" if element != "f32" else "%product"
    return (f"  %c0 = arith.constant 0 : index\n"
            f"  %rows = tensor.dim %dy, %c0 : {rows}\n"
            f"  %init = tensor.empty(%rows) : {rows}\n"
            f"  %dy_kept = linalg.generic {{indexing_maps = [{identity}, {identity}, {identity}], "
            f"iterator_types = [{parallel}]}}\n"
            f"      ins(%dy, %keep : {rows}, {keep}) outs(%init : {rows}) {{\n"
            f"  ^bb0(%a: {element}, %k: i8, %o: {element}):\n"
            f"    %dropped = arith.constant 0 : i8\n"
            f"    %kept_here = arith.cmpi ne, %k, %dropped : i8\n"
            f"    %scale = arith.constant {_f32_literal(dy_scale)} : f32\n"
            f"    %zero = arith.constant 0.0 : f32\n"
            f"    %factor = arith.select %kept_here, %scale, %zero : f32\n"
            f"{widen}"
            f"    %product = arith.mulf {wide}, %factor : f32\n"
            f"{narrow}"
            f"    linalg.yield {kept} : {element}\n"
            f"  }} -> {rows}\n"), f", %keep: {keep}"


def _module(kind, dtype, normalized_shape, has_weight, has_bias, eps, dy_scale=None, param_dtype=None):
    """The MLIR of @forward, @backward and @backward_accumulate of one norm
    over rows [?, *shape]; with `dy_scale`, only the backward functions,
    which take a dropout's keep mask after the weight and apply it, with
    the scale, to dy as they read it (_masked_dy). With f32 parameters of
    an f16 or bf16 norm (_mixed), the norm is f32's, on x and dy widened,
    its y and dx narrowed to x's dtype: elementwise work that fff's fusion
    applies as each row is read and written."""
    x, p, s = _types(dtype, normalized_shape, param_dtype)
    mixed = param_dtype is not None and _mixed(dtype, param_dtype)
    c = _types(torch.float32, normalized_shape)[0] if mixed else x  # the type the norm computes in

    def widened(name):
        """(the lines that widen %name to f32 where the norm is mixed, the
        value the norm takes)."""
        return (f"  {name}_wide = arith.extf {name} : {x} to {c}\n", f"{name}_wide") if mixed else ("", name)

    def narrowed(name):
        """(the norm's result for %name, the lines that narrow it)."""
        return (f"{name}_wide", f"  {name} = arith.truncf {name}_wide : {c} to {x}\n") if mixed else (name, "")

    rank = f"normalized_rank {len(normalized_shape)}"
    params = [("%w", "scale")] if has_weight else []
    if has_bias:
        params.append(("%b", "bias"))
    arguments = "".join(f", {name}: {p}" for name, _ in params)
    operands = "".join(f" {word}({name} : {p})" for name, word in params)
    scale = f" scale(%w : {p})" if has_weight else ""
    weight_arg = f", %w: {p}" if has_weight else ""
    grads = (["%dw"] if has_weight else []) + (["%db"] if kind == "layer_norm" and has_bias else [])
    grad_types = "".join(f", {p}" for _ in grads)
    prologue, keep_arg = _masked_dy(dtype, normalized_shape, dy_scale) if dy_scale is not None else ("", "")
    widen_x, x_in = widened("%x")
    widen_dy, dy = widened("%dy_kept" if dy_scale is not None else "%dy")
    prologue += widen_dy + widen_x
    y, narrow_y = narrowed("%y")
    dx, narrow_dx = narrowed("%dx")
    if kind == "layer_norm":
        forward = (f"{widen_x}  {y}, %mean, %rstd = fff.layer_norm {x_in}{operands} {rank} return_stats "
                   f"{_epsilon(eps)} : {c}\n{narrow_y}"
                   f"  return %y, %mean, %rstd : {x}, {s}, {s}")
        forward_results = f"{x}, {s}, {s}"
        bias_grad = " bias_grad" if has_bias else ""
        backward_args = f"%dy: {x}, %x: {x}, %mean: {s}, %rstd: {s}{weight_arg}{keep_arg}"
        backward = f"fff.layer_norm_grad {dy}, {x_in}, %mean, %rstd{scale}{bias_grad} {rank} : {c}, {s}"
    else:
        forward = (f"{widen_x}  {y} = fff.rms_norm {x_in}{operands} {rank} {_epsilon(eps)} : {c}\n{narrow_y}"
                   f"  return %y : {x}")
        forward_results = x
        backward_args = f"%dy: {x}, %x: {x}{weight_arg}{keep_arg}"
        backward = f"fff.rms_norm_grad {dy}, {x_in}{scale} {rank} {_epsilon(eps)} : {c}"
    results = ", ".join([dx] + grads)
    returned = ", ".join(["%dx"] + grads)
    # @backward_accumulate adds the residual stream's gradient to dx (a
    # pre-LN block's dh = dresidual + dx) as the kernel writes dx.
    accumulated = ", ".join(["%dh"] + grads)
    forward_function = "" if dy_scale is not None else \
        f"func.func @forward(%x: {x}{arguments}) -> ({forward_results}) {{\n{forward}\n}}\n"
    return (forward_function +
            f"func.func @backward({backward_args}) -> ({x}{grad_types}) {{\n{prologue}"
            f"  {results} = {backward}\n{narrow_dx}"
            f"  return {returned} : {x}{grad_types}\n}}\n"
            f"func.func @backward_accumulate({backward_args}, %dresidual: {x}) -> ({x}{grad_types}) {{\n{prologue}"
            f"  {results} = {backward}\n{narrow_dx}"
            f"  %dh = arith.addf %dresidual, %dx : {x}\n"
            f"  return {accumulated} : {x}{grad_types}\n}}\n")


def _reference(kind, x, weight, bias, normalized_shape, eps, dy):
    """y, dx, dweight, dbias of the norm in float64, by DESIGN.md's formulas
    (custom ops run below autograd, so torch's own autograd is not at hand
    here; the tests hold these ops to it)."""
    dims = tuple(range(x.dim() - len(normalized_shape), x.dim()))
    rows = tuple(range(x.dim() - len(normalized_shape)))
    x, dy = x.double(), dy.double()
    w = weight.double() if weight is not None else torch.ones(normalized_shape, dtype=torch.float64)
    mean = x.mean(dims, keepdim=True) if kind == "layer_norm" else torch.zeros((), dtype=torch.float64)
    centred = x - mean
    rstd = (centred.square().mean(dims, keepdim=True) + eps).rsqrt()
    xhat = centred * rstd
    y = xhat * w + (bias.double() if bias is not None else 0)
    g = dy * w
    dx = g - xhat * (g * xhat).mean(dims, keepdim=True)
    if kind == "layer_norm":
        dx = dx - g.mean(dims, keepdim=True)
    return y, rstd * dx, (dy * xhat).sum(rows), dy.sum(rows)


def _far(actual, expected, dtype):
    error = (actual.double() - expected.double()).norm() / expected.double().norm().clamp_min(1e-30)
    return not bool(error <= _TOLERANCE[dtype])


class _Executable:
    """One norm's compiled forward and backward over rows of its normalized
    shape."""

    def __init__(self, kind, dtype, normalized_shape, has_weight, has_bias, eps, placement, param_dtype):
        self.kind, self.dtype, self.shape, self.param_dtype = kind, dtype, normalized_shape, param_dtype
        self.has_weight, self.has_bias = has_weight, has_bias
        self.eps, self.placement = eps, placement
        self.exe = self._compiled()
        # The backward functions that apply a dropout's keep mask to dy, by
        # the dropout's scale (each compiled and checked on first use).
        self.masked = {}
        self._check()

    def _compiled(self, dy_scale=None):
        try:
            return _compile(_module(self.kind, self.dtype, self.shape, self.has_weight, self.has_bias, self.eps,
                                    dy_scale, self.param_dtype), target=self.placement.target,
                            **dict(self.placement.options))
        except Exception as error:  # fff refused the module
            text = str(error).strip()
            raise Unsupported(f"it did not compile: {text.splitlines()[0] if text else type(error).__name__}")

    def with_masked_dy(self, dy_scale):
        """The backward functions that take a keep mask after the weight and
        compute with dy * (keep ? dy_scale : 0); raises Unsupported where
        fff does not compile or check them."""
        def checked():
            exe = self._compiled(dy_scale)
            self._check_masked(exe, dy_scale)
            return exe
        return _cached(self.masked, dy_scale, checked)

    def _flattened(self, t, trailing):
        """t with its leading dims flattened, before `trailing`. Each torch
        call here costs a backward call several microseconds, and tens after
        a call that swept the caches: a tensor already flat is passed as it
        is."""
        return t if t.dim() == len(self.shape) + 1 else t.reshape(-1, *trailing)

    def rows(self, t):
        return self._flattened(t, self.shape)

    def stats_rows(self, t):
        return self._flattened(t, (1,) * len(self.shape))

    @staticmethod
    def like(t, x):
        """t (rows) with x's shape."""
        return t if t.dim() == x.dim() else t.view(x.shape)

    def forward(self, x, weight, bias):
        rows = self.rows(x)
        args = [rows] + [t for t in (weight, bias) if t is not None]
        stats = [rows.shape[0], *(1 for _ in self.shape)]
        shapes = [rows.shape] + ([stats, stats] if self.kind == "layer_norm" else [])
        results = self.placement.call(self.exe.forward, args, shapes)
        stats_shape = x.shape[:x.dim() - len(self.shape)] + (1,) * len(self.shape)
        return [results[0].view(x.shape)] + [r.view(stats_shape) for r in results[1:]]

    def backward(self, dy, x, stats, weight, residual_grad=None, dy_keep=None, dy_scale=1.0):
        """dx (plus `residual_grad` where given), then the parameter
        gradients; with `dy_keep`, of dy * (dy_keep ? dy_scale : 0)."""
        exe = self.exe if dy_keep is None else self.with_masked_dy(dy_scale)
        return self._backward(exe, dy, x, stats, weight, residual_grad, dy_keep)

    def _backward(self, exe, dy, x, stats, weight, residual_grad, dy_keep):
        rows = self.rows(x)
        args = [self.rows(dy), rows] + [self.stats_rows(s) for s in stats] + ([weight] if weight is not None else [])
        if dy_keep is not None:
            args.append(self.rows(dy_keep).view(torch.int8))
        grads = int(self.has_weight) + int(self.has_bias and self.kind == "layer_norm")
        shapes = [rows.shape] + [self.shape] * grads
        if residual_grad is None:
            results = self.placement.call(exe.backward, args, shapes)
        else:
            results = self.placement.call(exe.backward_accumulate, args + [self.rows(residual_grad)], shapes)
        return [self.like(results[0], x)] + results[1:]

    def _check_inputs(self):
        """Seeded random inputs of the first call's check: three rows with
        the largest |x - mean| far from the rest, so that a wrong mean or
        rstd shows; dy, the parameters and a residual gradient."""
        generator = torch.Generator().manual_seed(0)
        shape = (3, *self.shape)
        x = (torch.randn(shape, generator=generator) * 2 + 0.5).to(self.dtype)
        dy = torch.randn(shape, generator=generator).to(self.dtype)
        weight = torch.randn(self.shape, generator=generator).to(self.param_dtype) if self.has_weight else None
        bias = torch.randn(self.shape, generator=generator).to(self.param_dtype) if self.has_bias else None
        residual_grad = torch.randn(shape, generator=generator).to(self.dtype)
        keep = torch.rand(shape, generator=generator) > 0.3
        return x, dy, weight, bias, residual_grad, keep

    def _on_device(self, *tensors):
        """`tensors` on the device fff's code takes (CUDA's; the emulator's
        and the CPU's take CPU tensors)."""
        device = "cuda" if self.placement.kind == "cuda" else "cpu"
        return [None if t is None else t.to(device) for t in tensors]

    def _check(self):
        """fff's forward and backward against torch's, once, on random
        data (_check_inputs)."""
        x, dy, weight, bias, residual_grad, _ = self._check_inputs()
        y, dx, dweight, dbias = _reference(self.kind, x, weight, bias, self.shape, self.eps, dy)
        x, dy, weight, bias, residual_grad = self._on_device(x, dy, weight, bias, residual_grad)
        forward = [t.cpu() for t in self.forward(x, weight, bias)]
        stats = self._on_device(*forward[1:])
        grads = [t.cpu() for t in self.backward(dy, x, stats, weight)]
        accumulated = self.backward(dy, x, stats, weight, residual_grad)[0].cpu()
        checks = [("y", forward[0], y)] + self._gradient_checks(grads, accumulated, dx, dweight, dbias,
                                                                residual_grad.cpu())
        self._hold(checks)

    def _check_masked(self, exe, dy_scale):
        """The backward functions of `exe`, which mask dy, against torch's
        on the first call's data with a random keep mask."""
        x, dy, weight, bias, residual_grad, keep = self._check_inputs()
        # What the backward graph's own ops would give dy (_masked_dy).
        kept = (dy.float() * (keep.float() * float(np.float32(dy_scale)))).to(self.dtype)
        _, dx, dweight, dbias = _reference(self.kind, x, weight, bias, self.shape, self.eps, kept)
        x, dy, weight, bias, residual_grad, keep = self._on_device(x, dy, weight, bias, residual_grad, keep)
        stats = self.forward(x, weight, bias)[1:]
        grads = [t.cpu() for t in self._backward(exe, dy, x, stats, weight, None, keep)]
        accumulated = self._backward(exe, dy, x, stats, weight, residual_grad, keep)[0].cpu()
        self._hold(self._gradient_checks(grads, accumulated, dx, dweight, dbias, residual_grad.cpu()),
                   "with a dropout's mask on dy ")

    def _gradient_checks(self, grads, accumulated, dx, dweight, dbias, residual_grad):
        checks = [("dx", grads[0], dx),
                  ("dx plus the residual gradient", accumulated, dx + residual_grad.double())]
        if self.has_weight:
            checks.append(("dweight", grads[1], dweight))
        if self.has_bias and self.kind == "layer_norm":
            checks.append(("dbias", grads[-1], dbias))
        return checks

    def _hold(self, checks, what=""):
        for name, a, e in checks:
            dtype = self.param_dtype if name in ("dweight", "dbias") else self.dtype
            if a.shape != e.shape or a.dtype != dtype or _far(a, e, self.dtype):
                raise Unsupported(f"its compiled {name} {what}differs from torch's")


_EXECUTABLES = {}
_LOCK = threading.Lock()


def executable(kind, dtype, normalized_shape, has_weight, has_bias, eps, placement=CPU, param_dtype=None):
    """The checked executable of one norm of x's `dtype`, its parameters of
    `param_dtype` (x's dtype by default, or f32 for an f16 or bf16 x:
    _mixed), its code run at `placement`; raises Unsupported with the
    reason where fff does not train it."""
    if dtype not in _MLIR:
        raise Unsupported(f"fff's norms take f32, f16 and bf16, not {dtype}")
    param_dtype = param_dtype or dtype
    _mixed(dtype, param_dtype)
    key = (kind, dtype, tuple(normalized_shape), has_weight, has_bias, float(eps), placement, param_dtype)
    return _cached(_EXECUTABLES, key, lambda: _Executable(*key))


def _cached(table, key, make):
    """table[key], made by `make` on first use; a refusal (Unsupported) is
    kept too, and raised again on every use."""
    with _LOCK:
        if key not in table:
            try:
                table[key] = make()
            except Unsupported as refusal:
                table[key] = refusal
        found = table[key]
    if isinstance(found, Unsupported):
        raise found
    return found


def prepare_masked_dy(kind, x, weight, has_bias, normalized_ndim, eps, emulate_cuda, dy_scale):
    """Compiles and checks, before a graph calls it, the backward of the
    norm of `kind` over `x` (a tensor, or a fake one of a graph being
    compiled) that applies a dropout's keep mask by `dy_scale` to dy;
    raises Unsupported, with the reason, where fff does not run it."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    try:
        placement = placement_of_device(x.device, emulate_cuda)
    except FFFError as error:
        raise Unsupported(str(error))
    with unset_fake_temporarily():
        executable(kind, x.dtype, _normalized(x, normalized_ndim), weight is not None, has_bias, eps,
                   placement, parameter_dtype(x, weight)).with_masked_dy(dy_scale)


def release_executables():
    with _LOCK:
        _EXECUTABLES.clear()


def count_backward(name, residual_grad=None, dy_keep=None):
    """Counts one call of the backward op `name`, and whether it added a
    residual gradient or masked dy (explain(backward=True) reports the
    counts)."""
    with _CALLS_LOCK:
        BACKWARD_CALLS[name] += 1
        if residual_grad is not None:
            RESIDUAL_GRAD_CALLS[name] += 1
        if dy_keep is not None:
            DY_MASK_CALLS[name] += 1


def _check_fused_inputs(x, residual_grad, dy_keep):
    """The backward ops' optional inputs that their fusions give
    (_backward_fusion.py): a residual gradient like x, a bool mask of x's
    shape."""
    if residual_grad is not None and (residual_grad.shape != x.shape or residual_grad.dtype != x.dtype):
        raise ValueError(f"residual_grad must have x's shape {tuple(x.shape)} and dtype {x.dtype}, got "
                         f"{tuple(residual_grad.shape)} {residual_grad.dtype}")
    if dy_keep is not None and (dy_keep.shape != x.shape or dy_keep.dtype != torch.bool):
        raise ValueError(f"dy_keep must be a bool mask of x's shape {tuple(x.shape)}, got "
                         f"{tuple(dy_keep.shape)} {dy_keep.dtype}")


def _stats_shape(x, normalized_ndim):
    _normalized(x, normalized_ndim)
    return x.shape[:x.dim() - normalized_ndim] + (1,) * normalized_ndim


def _normalized(x, normalized_ndim):
    """x's trailing `normalized_ndim` extents, the normalized shape."""
    if not 1 <= normalized_ndim <= x.dim():
        raise ValueError(f"normalized_ndim must be in [1, {x.dim()}] (the input's rank), got {normalized_ndim}")
    return tuple(x.shape[x.dim() - normalized_ndim:])


def parameter_dtype(x, weight, bias=None):
    """The dtype of a norm's parameters, x's where it has none: the weight
    and bias share one. A backward op knows it from the weight alone, so a
    norm whose parameters are not of x's dtype (_mixed) has a weight."""
    dtypes = {t.dtype for t in (weight, bias) if t is not None}
    if len(dtypes) > 1:
        raise ValueError(f"a norm's weight and bias must have one dtype, got {weight.dtype} and {bias.dtype}")
    dtype = dtypes.pop() if dtypes else x.dtype
    if dtype != x.dtype and weight is None:
        raise ValueError(f"a norm of a {x.dtype} input whose bias is {dtype} needs a weight of that dtype too")
    return dtype


def _no_grad(t):
    return torch.empty(0, dtype=t.dtype, device=t.device)


@direct_op("fff::layer_norm_train")
def layer_norm_train(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
                     normalized_ndim: int, eps: float, emulate_cuda: bool = False
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """LayerNorm over x's trailing `normalized_ndim` dims: y, mean, rstd.
    With `emulate_cuda`, CPU tensors run the GPU's code on fff's PTX
    emulator (the backend's option of that name)."""
    exe = executable("layer_norm", x.dtype, _normalized(x, normalized_ndim), weight is not None,
                     bias is not None, eps, placement_of_device(x.device, emulate_cuda),
                     parameter_dtype(x, weight, bias))
    y, mean, rstd = exe.forward(x, weight, bias)
    return y, mean, rstd


@layer_norm_train.register_fake
def _(x, weight, bias, normalized_ndim, eps, emulate_cuda=False):
    stats = _stats_shape(x, normalized_ndim)
    return (torch.empty(x.shape, dtype=x.dtype, device=x.device),
            x.new_empty(stats, dtype=torch.float32), x.new_empty(stats, dtype=torch.float32))


@direct_op("fff::layer_norm_train_backward")
def layer_norm_train_backward(dy: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor,
                              weight: torch.Tensor | None, normalized_ndim: int, has_bias: bool,
                              eps: float, residual_grad: torch.Tensor | None = None, emulate_cuda: bool = False,
                              dy_keep: torch.Tensor | None = None, dy_scale: float = 1.0
                              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """fff.layer_norm_grad: dx, dweight and dbias (empty where absent).
    With `residual_grad`, the first result is residual_grad + dx, added as
    dx is written (the backward graph's residual add); with `dy_keep`, the
    gradients are those of dy * (dy_keep ? dy_scale : 0), masked as dy is
    read (a dropout's backward after the norm). _backward_fusion.py fuses
    both from backward graphs."""
    _check_fused_inputs(x, residual_grad, dy_keep)
    exe = executable("layer_norm", x.dtype, _normalized(x, normalized_ndim), weight is not None, has_bias, eps,
                     placement_of_device(x.device, emulate_cuda), parameter_dtype(x, weight))
    count_backward("layer_norm_grad", residual_grad, dy_keep)
    grads = exe.backward(dy, x, (mean, rstd), weight, residual_grad, dy_keep, dy_scale)
    return grads[0], grads[1] if weight is not None else _no_grad(x), grads[-1] if has_bias else _no_grad(x)


@layer_norm_train_backward.register_fake
def _(dy, x, mean, rstd, weight, normalized_ndim, has_bias, eps, residual_grad=None, emulate_cuda=False,
      dy_keep=None, dy_scale=1.0):
    _check_fused_inputs(x, residual_grad, dy_keep)
    shape, dtype = _normalized(x, normalized_ndim), parameter_dtype(x, weight)
    return (torch.empty(x.shape, dtype=x.dtype, device=x.device),
            x.new_empty(shape if weight is not None else (0,), dtype=dtype),
            x.new_empty(shape if has_bias else (0,), dtype=dtype))


def _layer_norm_setup(ctx, inputs, output):
    x, weight, bias, normalized_ndim, eps, emulate_cuda = inputs
    _, mean, rstd = output
    ctx.save_for_backward(x, weight, mean, rstd)
    ctx.normalized_ndim, ctx.has_bias, ctx.eps, ctx.emulate_cuda = normalized_ndim, bias is not None, eps, emulate_cuda


def _layer_norm_backward(ctx, dy, _dmean, _drstd):
    x, weight, mean, rstd = ctx.saved_tensors
    if torch.is_grad_enabled():
        # backward(create_graph=True): the gradient must itself be
        # differentiable, which fff's backward op is not; torch's is.
        shape = _normalized(x, ctx.normalized_ndim)
        bias = torch.zeros(shape, dtype=x.dtype, device=x.device) if ctx.has_bias else None
        dx, dweight, dbias = torch.ops.aten.native_layer_norm_backward(
            # Its double backward differentiates through x (mean and rstd
            # are x's) and takes the statistics as constants.
            dy, x, shape, mean.detach(), rstd.detach(), weight, bias,
            [True, weight is not None, ctx.has_bias])
    else:
        dx, dweight, dbias = torch.ops.fff.layer_norm_train_backward(dy, x, mean, rstd, weight,
                                                                      ctx.normalized_ndim, ctx.has_bias, ctx.eps,
                                                                      emulate_cuda=ctx.emulate_cuda)
    return dx, dweight if weight is not None else None, dbias if ctx.has_bias else None, None, None, None


layer_norm_train.register_autograd(_layer_norm_backward, setup_context=_layer_norm_setup)


@direct_op("fff::rms_norm_train")
def rms_norm_train(x: torch.Tensor, weight: torch.Tensor | None, normalized_ndim: int, eps: float,
                   emulate_cuda: bool = False) -> torch.Tensor:
    """RMSNorm over x's trailing `normalized_ndim` dims (`emulate_cuda` as
    for layer_norm_train)."""
    exe = executable("rms_norm", x.dtype, _normalized(x, normalized_ndim), weight is not None, False, eps,
                     placement_of_device(x.device, emulate_cuda), parameter_dtype(x, weight))
    return exe.forward(x, weight, None)[0]


@rms_norm_train.register_fake
def _(x, weight, normalized_ndim, eps, emulate_cuda=False):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@direct_op("fff::rms_norm_train_backward")
def rms_norm_train_backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, normalized_ndim: int,
                            eps: float, residual_grad: torch.Tensor | None = None, emulate_cuda: bool = False,
                            dy_keep: torch.Tensor | None = None, dy_scale: float = 1.0
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    """fff.rms_norm_grad: dx and dweight (empty where absent); with
    `residual_grad` and `dy_keep`, as layer_norm_train_backward."""
    _check_fused_inputs(x, residual_grad, dy_keep)
    exe = executable("rms_norm", x.dtype, _normalized(x, normalized_ndim), weight is not None, False, eps,
                     placement_of_device(x.device, emulate_cuda), parameter_dtype(x, weight))
    count_backward("rms_norm_grad", residual_grad, dy_keep)
    grads = exe.backward(dy, x, (), weight, residual_grad, dy_keep, dy_scale)
    return grads[0], grads[1] if weight is not None else _no_grad(x)


@rms_norm_train_backward.register_fake
def _(dy, x, weight, normalized_ndim, eps, residual_grad=None, emulate_cuda=False, dy_keep=None, dy_scale=1.0):
    _check_fused_inputs(x, residual_grad, dy_keep)
    shape = _normalized(x, normalized_ndim) if weight is not None else (0,)
    return torch.empty(x.shape, dtype=x.dtype, device=x.device), x.new_empty(shape, dtype=parameter_dtype(x, weight))


def _rms_norm_setup(ctx, inputs, output):
    x, weight, normalized_ndim, eps, emulate_cuda = inputs
    ctx.save_for_backward(x, weight)
    ctx.normalized_ndim, ctx.eps, ctx.emulate_cuda = normalized_ndim, eps, emulate_cuda


def _rms_norm_backward(ctx, dy):
    x, weight = ctx.saved_tensors
    if torch.is_grad_enabled():
        # backward(create_graph=True): the gradient in torch's ops, which
        # autograd differentiates again; fff's backward op is not.
        dx, dweight = _rms_norm_vjp(x, weight, dy, ctx.normalized_ndim, ctx.eps)
        return dx, dweight, None, None, None
    dx, dweight = torch.ops.fff.rms_norm_train_backward(dy, x, weight, ctx.normalized_ndim, ctx.eps,
                                                        emulate_cuda=ctx.emulate_cuda)
    return dx, dweight if weight is not None else None, None, None, None


def _rms_norm_vjp(x, weight, dy, normalized_ndim, eps):
    """dx and dweight of rms_norm by DESIGN.md's formula in torch ops (which
    autograd differentiates again), in f32 for half types, as ATen is."""
    dims = tuple(range(x.dim() - normalized_ndim, x.dim()))
    wide = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    g = dy.to(wide.dtype) * (weight.to(wide.dtype) if weight is not None else 1)
    rstd = (wide.square().mean(dims, keepdim=True) + eps).rsqrt()
    xhat = wide * rstd
    dx = rstd * (g - xhat * (g * xhat).mean(dims, keepdim=True))
    rows = tuple(range(x.dim() - normalized_ndim))
    dweight = (dy.to(wide.dtype) * xhat).sum(rows).to(weight.dtype) if weight is not None else None
    return dx.to(x.dtype), dweight


rms_norm_train.register_autograd(_rms_norm_backward, setup_context=_rms_norm_setup)


def train_op(kind):
    """The custom op of a trained norm of `kind`."""
    return torch.ops.fff.layer_norm_train.default if kind == "layer_norm" else torch.ops.fff.rms_norm_train.default
