"""The gradients of the tree layers' custom ops: fff::tree_ffn,
fff::leaf_tree_ffn and fff::tree_sublayer.

Each backward is itself a custom op (fff::tree_ffn_backward,
fff::leaf_tree_ffn_backward, fff::tree_sublayer_backward), opaque to
AOTAutograd: torch.compile's backward graphs call it as they call the norms'
backward ops, and explain(backward=True) counts it (as tree_ffn_grad,
leaf_tree_ffn_grad, tree_sublayer_grad). Where the backward itself must be
differentiable (backward(create_graph=True)), the tree ops' gradients run
as the plain torch functions below instead, which autograd differentiates.

fff::tree_ffn: UltraFastBERT's training semantics (shared/DESIGN.md,
"Gradients"): the gradient of its masked dense layer, whose values equal
the op's. Routing is hard and gets no gradient. For each row b, tree k and
node n on b's path, with logit l:

    dw_out[k, n] += act(l) * dy[b]          dl = dot(dy[b], w_out[k, n]) * act'(l)
    dx[b]        += dl * w_in[k, n]         dw_in[k, n] += dl * x[b]
    db_in[k, n]  += dl                      db_out = sum over b of dy[b]

On CPU tensors of f32, f16 and bf16 this runs on fff's kernel of the
dialect's fff.tree_ffn_grad (_kernels.tree_ffn_grad): each node's sums in
row order, the same bits for any thread count. Elsewhere (f64, CUDA) and
for double backward, tree_ffn_backward below computes it in torch ops. Both
walk each row's path again (the forward saves nothing but its inputs). The
kernel sums each logit as the forward kernel does, so it takes the
forward's paths; the torch ops sum in their own order, and a logit within
rounding of 0 may route otherwise there (all send exactly 0 left).

fff::leaf_tree_ffn: the hard-routed gradient. The chosen leaf's w1, b1,
w2, b2 and x get gradients; the routing nodes get zero (a zero tensor, not
None, so that an optimizer treats them as the `fastfeedforward` package's
training with hard decisions does: weight decay still applies). On CPU and
CUDA tensors of f32, f16 and bf16 (and on the emulator) it runs on fff's
kernels of the dialect's fff.leaf_tree_ffn_grad
(_kernels.leaf_tree_ffn_grad): each leaf's sums over its rows in row order,
the same bits for any thread count or grid. Elsewhere (f64; leaves wider
than the GPU kernels' 64 units; on the CPU, leaves so wide, with so many
rows each, that their products are dense matrix multiplications, which
torch's BLAS runs faster: _kernels.takes_leaf_grad) and for double backward,
leaf_tree_ffn_backward below groups the rows by leaf in torch ops, each
leaf's gradients a few matrix products over its rows. Either routes each
row again; a score within rounding of 0 may route otherwise than the
forward's kernel did (all send exactly 0 right).

The torch-op gradients compute in f32 (f64 for f64 inputs) and return each
gradient in its tensor's dtype; all weight gradients are dense tensors.

The forwards of fff::tree_ffn and fff::leaf_tree_ffn in torch ops are here
too (tree_ffn_forward, leaf_tree_ffn_forward): fff compiles no f64, and the
ops run f64 tensors in them, with the routing of the paths above.
"""

import math

import torch

from . import _kernels
from ._devices import placement_of_device
from ._ops import direct_op
from ._training import count_backward
from ._tree_checks import check_leaf, check_output_grad, check_sublayer, check_tree

_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_SCALE = math.sqrt(2.0 / math.pi)


def _activation_and_slope(activation, logits):
    """act(l) and act'(l), in the logits' dtype, for fff's activations
    (their definitions as in shared/DESIGN.md)."""
    if activation == "gelu":
        cdf = 0.5 * (1.0 + torch.erf(logits * _SQRT_HALF))
        return logits * cdf, cdf + logits * _INV_SQRT_2PI * torch.exp(-0.5 * logits * logits)
    if activation == "gelu_tanh":
        inner = _TANH_SCALE * (logits + 0.044715 * logits ** 3)
        t = torch.tanh(inner)
        slope = 0.5 * (1.0 + t) + 0.5 * logits * (1.0 - t * t) * _TANH_SCALE * (1.0 + 3 * 0.044715 * logits ** 2)
        return 0.5 * logits * (1.0 + t), slope
    if activation == "relu":
        positive = (logits > 0).to(logits.dtype)
        return logits * positive, positive
    if activation == "silu":
        s = torch.sigmoid(logits)
        return logits * s, s * (1.0 + logits * (1.0 - s))
    if activation == "identity":
        return logits, torch.ones_like(logits)
    raise ValueError(f"unknown activation '{activation}'")


def tree_paths(x, w_in, b_in, depth, zero_goes_right=False):
    """Each row's node and logit per tree and level: [B, K, depth+1] int64
    and x's dtype, for rows x [B, Din]. A logit of exactly 0 goes left, or
    right with `zero_goes_right`, as in the op."""
    rows, trees = x.shape[0], w_in.shape[0]
    tree_index = torch.arange(trees, device=x.device).expand(rows, trees)
    node = torch.zeros(rows, trees, dtype=torch.int64, device=x.device)
    nodes, logits = [], []
    for _ in range(depth + 1):
        weights = w_in[tree_index, node].to(x.dtype)  # [B, K, Din]
        logit = torch.einsum("bd,bkd->bk", x, weights)
        if b_in is not None:
            logit = logit + b_in[tree_index, node].to(x.dtype)
        nodes.append(node)
        logits.append(logit)
        goes_right = logit >= 0 if zero_goes_right else logit > 0
        node = 2 * node + 1 + goes_right.to(torch.int64)
    return torch.stack(nodes, -1), torch.stack(logits, -1)


def _flat_nodes(nodes, count):
    """tree_paths' nodes [B, K, L] as rows of the weights flattened to
    [K * N, ...]: tree k's node n is row k * N + n."""
    trees = nodes.shape[1]
    return torch.arange(trees, device=nodes.device).view(1, trees, 1) * count + nodes


def tree_ffn_forward(x, w_in, b_in, w_out, b_out, depth, activation, zero_goes_right=False):
    """fff::tree_ffn in torch ops, in x's dtype, on x's device: the op's
    form for f64 tensors, which fff does not compile (gradcheck through
    TreeFFN.double())."""
    din, dout = x.shape[-1], w_out.shape[2]
    trees, count = w_in.shape[0], w_in.shape[1]
    rows = x.reshape(-1, din)
    nodes, logits = tree_paths(rows, w_in, b_in, depth, zero_goes_right)
    act, _ = _activation_and_slope(activation, logits)
    flat = _flat_nodes(nodes, count)
    w_out_rows = w_out.reshape(trees * count, dout)
    y = rows.new_zeros(rows.shape[0], dout) if b_out is None else b_out.expand(rows.shape[0], dout)
    # A level at a time: a row of w_out per token and tree in memory.
    for level in range(depth + 1):
        y = y + torch.einsum("bk,bko->bo", act[..., level], w_out_rows[flat[..., level]])
    return y.reshape(*x.shape[:-1], dout)


def tree_ffn_backward(dy, x, w_in, b_in, w_out, b_out, depth, activation, zero_goes_right=False):
    """(dx, dw_in, db_in, dw_out, db_out) of fff::tree_ffn for the output
    gradient dy; None for an absent bias."""
    din, dout = x.shape[-1], w_out.shape[2]
    trees, count = w_in.shape[0], w_in.shape[1]
    # f32 arithmetic, as the forward's; float64 for float64 inputs (the
    # gradient checks).
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    rows = x.reshape(-1, din).to(compute)
    grad = dy.reshape(-1, dout).to(compute)
    nodes, logits = tree_paths(rows, w_in, b_in, depth, zero_goes_right)
    act, slope = _activation_and_slope(activation, logits)
    # Rows of the weights flattened to [K * N, ...]: tree k's node n is row
    # k * N + n. A level at a time, so that memory stays at a row per token
    # and tree.
    flat = _flat_nodes(nodes, count)
    w_in_rows, w_out_rows = w_in.reshape(trees * count, din), w_out.reshape(trees * count, dout)
    dx = torch.zeros_like(rows)
    dw_in = rows.new_zeros(trees * count, din)
    dw_out = rows.new_zeros(trees * count, dout)
    db_in = rows.new_zeros(trees * count)
    for level in range(depth + 1):
        visited = flat[..., level]  # [B, K]
        dl = torch.einsum("bo,bko->bk", grad, w_out_rows[visited].to(compute)) * slope[..., level]
        dx = dx + torch.einsum("bk,bkd->bd", dl, w_in_rows[visited].to(compute))
        index = visited.reshape(-1)
        dw_in = dw_in.index_add(0, index, (dl.unsqueeze(-1) * rows.unsqueeze(1)).reshape(-1, din))
        dw_out = dw_out.index_add(0, index, (act[..., level].unsqueeze(-1) * grad.unsqueeze(1)).reshape(-1, dout))
        db_in = db_in.index_add(0, index, dl.reshape(-1))
    db_in = db_in.view(trees, count).to(b_in.dtype) if b_in is not None else None
    db_out = grad.sum(0).to(b_out.dtype) if b_out is not None else None
    return (dx.reshape(x.shape).to(x.dtype), dw_in.view(trees, count, din).to(w_in.dtype), db_in,
            dw_out.view(trees, count, dout).to(w_out.dtype), db_out)




def tree_ffn_gradients(dy, x, w_in, b_in, w_out, b_out, depth, activation, emulate_cuda=False,
                       zero_goes_right=False):
    """tree_ffn_backward's gradients, on fff's tree_ffn_grad kernel where it
    takes the tensors (CPU or CUDA, or the emulator with `emulate_cuda`;
    f32/f16/bf16: deterministic, the same bits for any thread count or
    grid), else in torch ops."""
    if _kernels.takes_tree_grad(x):
        return _kernels.tree_ffn_grad(dy, x, w_in, b_in, w_out, b_out, depth, activation,
                                      placement_of_device(x.device, emulate_cuda), zero_goes_right)
    return tree_ffn_backward(dy, x, w_in, b_in, w_out, b_out, depth, activation, zero_goes_right)


def leaf_paths(rows, node_w, node_b, depth):
    """Each row's leaf, int64 [B], for rows [B, Din] of the routing nodes'
    dtype: `depth` hyperplanes, a score >= 0 goes right (as the op and the
    fastfeedforward package's eval forward do)."""
    node = torch.zeros(rows.shape[0], dtype=torch.int64, device=rows.device)
    for _ in range(depth):
        score = torch.einsum("bd,bd->b", rows, node_w[node].to(rows.dtype)) + node_b[node].to(rows.dtype)
        node = 2 * node + 1 + (score >= 0).to(torch.int64)
    return node - (2 ** depth - 1)


def _rows_by_leaf(leaf, leaves):
    """(leaf, its rows' indices) for each leaf some row reached, in leaf
    order: a counting sort, so that each leaf's rows are one block."""
    order = torch.argsort(leaf, stable=True)
    start = 0
    for index, count in enumerate(torch.bincount(leaf, minlength=leaves).tolist()):
        if count:
            yield index, order[start:start + count]
        start += count


def leaf_tree_ffn_forward(x, node_w, node_b, w1, b1, w2, b2, depth, activation):
    """fff::leaf_tree_ffn in torch ops, in x's dtype, on x's device (the
    op's form for f64 tensors): each leaf's rows as one block."""
    din, dout = x.shape[-1], w2.shape[-1]
    rows = x.reshape(-1, din)
    leaf = leaf_paths(rows, node_w, node_b, depth)
    y = rows.new_empty(rows.shape[0], dout)
    for index, chosen in _rows_by_leaf(leaf, w1.shape[0]):
        hidden, _ = _activation_and_slope(activation, rows[chosen] @ w1[index] + b1[index])
        y[chosen] = hidden @ w2[index] + b2[index]
    return y.reshape(*x.shape[:-1], dout)


def leaf_tree_ffn_backward(dy, x, node_w, node_b, w1, b1, w2, b2, depth, activation):
    """(dx, dnode_w, dnode_b, dw1, db1, dw2, db2) of fff::leaf_tree_ffn for
    the output gradient dy; the routing nodes' are zero."""
    din, dout, leaves = x.shape[-1], w2.shape[-1], w1.shape[0]
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    rows = x.reshape(-1, din).to(compute)
    grad = dy.reshape(-1, dout).to(compute)
    leaf = leaf_paths(rows, node_w, node_b, depth)
    dx = torch.zeros_like(rows)
    dw1, db1 = rows.new_zeros(w1.shape), rows.new_zeros(b1.shape)
    dw2, db2 = rows.new_zeros(w2.shape), rows.new_zeros(b2.shape)
    for index, chosen in _rows_by_leaf(leaf, leaves):
        xs, g = rows[chosen], grad[chosen]
        first, second = w1[index].to(compute), w2[index].to(compute)
        hidden, slope = _activation_and_slope(activation, xs @ first + b1[index].to(compute))
        dw2[index], db2[index] = hidden.t() @ g, g.sum(0)
        dpre = (g @ second.t()) * slope
        dw1[index], db1[index] = xs.t() @ dpre, dpre.sum(0)
        dx[chosen] = dpre @ first.t()
    return (dx.reshape(x.shape).to(x.dtype), torch.zeros_like(node_w), torch.zeros_like(node_b),
            dw1.to(w1.dtype), db1.to(b1.dtype), dw2.to(w2.dtype), db2.to(b2.dtype))


def leaf_tree_ffn_gradients(dy, x, node_w, node_b, w1, b1, w2, b2, depth, activation, emulate_cuda=False):
    """leaf_tree_ffn_backward's gradients, on fff's leaf_tree_ffn_grad
    kernels where they take the tensors (CPU or CUDA, or the emulator with
    `emulate_cuda`; f32/f16/bf16; leaves not so wide that BLAS wins: each
    leaf's sums in row order, the same bits for any thread count or grid),
    else in torch ops."""
    if _kernels.takes_leaf_grad(x, w1, emulate_cuda):
        dx, dw1, db1, dw2, db2 = _kernels.leaf_tree_ffn_grad(dy, x, node_w, node_b, w1, b1, w2, depth, activation,
                                                             placement_of_device(x.device, emulate_cuda))
        return dx, torch.zeros_like(node_w), torch.zeros_like(node_b), dw1, db1, dw2, db2
    return leaf_tree_ffn_backward(dy, x, node_w, node_b, w1, b1, w2, b2, depth, activation)


def _fresh(t, like):
    """A fake result like `t`, contiguous whatever `t`'s strides (the
    gradients are new tensors in row-major order; empty_like would keep a
    transposed weight's strides, and Inductor would plan for them), or
    empty for an absent `t`, as _present gives it."""
    return t.new_empty(t.shape) if t is not None else like.new_empty(0)


def _present(t, like):
    """A custom op's results are tensors: an absent gradient is empty."""
    return t if t is not None else like.new_empty(0)


@direct_op("fff::tree_ffn_backward")
def tree_ffn_backward_op(dy: torch.Tensor, x: torch.Tensor, w_in: torch.Tensor, b_in: torch.Tensor | None,
                         w_out: torch.Tensor, b_out: torch.Tensor | None, depth: int,
                         activation: str, emulate_cuda: bool = False, zero_goes_right: bool = False
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """dx, dw_in, db_in, dw_out, db_out of fff::tree_ffn (empty for an
    absent bias)."""
    check_tree(x, w_in, b_in, w_out, b_out, depth, activation, zero_goes_right)
    check_output_grad("fff::tree_ffn_backward", dy, x, (*x.shape[:-1], w_out.shape[2]))
    count_backward("tree_ffn_grad")
    grads = tree_ffn_gradients(dy, x, w_in, b_in, w_out, b_out, depth, activation, emulate_cuda, zero_goes_right)
    return tuple(_present(g, x) for g in grads)


@tree_ffn_backward_op.register_fake
def _(dy, x, w_in, b_in, w_out, b_out, depth, activation, emulate_cuda=False, zero_goes_right=False):
    return tuple(_fresh(t, x) for t in (x, w_in, b_in, w_out, b_out))


@direct_op("fff::leaf_tree_ffn_backward")
def leaf_tree_ffn_backward_op(dy: torch.Tensor, x: torch.Tensor, node_w: torch.Tensor, node_b: torch.Tensor,
                              w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor, depth: int,
                              activation: str, emulate_cuda: bool = False) -> list[torch.Tensor]:
    """dx, dnode_w (zero), dnode_b (zero), dw1, db1, dw2, db2 of
    fff::leaf_tree_ffn."""
    check_leaf(x, node_w, node_b, w1, b1, w2, b2, depth, activation)
    check_output_grad("fff::leaf_tree_ffn_backward", dy, x, (*x.shape[:-1], w2.shape[-1]))
    count_backward("leaf_tree_ffn_grad")
    return list(leaf_tree_ffn_gradients(dy, x, node_w, node_b, w1, b1, w2, b2, depth, activation, emulate_cuda))


@leaf_tree_ffn_backward_op.register_fake
def _(dy, x, node_w, node_b, w1, b1, w2, b2, depth, activation, emulate_cuda=False):
    return [_fresh(t, x) for t in (x, node_w, node_b, w1, b1, w2, b2)]


def setup_tree_context(ctx, inputs, output):
    """Saves fff::tree_ffn's tensors (x, w_in, b_in, w_out, b_out) and its
    depth, activation, emulate_cuda and zero_goes_right."""
    ctx.save_for_backward(*inputs[:5])
    ctx.depth, ctx.activation, ctx.emulate_cuda, ctx.zero_goes_right = inputs[5:]


def setup_leaf_tree_context(ctx, inputs, output):
    """Saves fff::leaf_tree_ffn's tensors (all but its last three inputs:
    the depth, the activation and emulate_cuda)."""
    ctx.save_for_backward(*inputs[:-3])
    ctx.depth, ctx.activation, ctx.emulate_cuda = inputs[-3:]


def tree_ffn_autograd(ctx, dy):
    saved = ctx.saved_tensors
    if torch.is_grad_enabled():  # backward(create_graph=True): differentiable torch ops
        grads = tree_ffn_backward(dy, *saved, ctx.depth, ctx.activation, ctx.zero_goes_right)
    else:
        grads = torch.ops.fff.tree_ffn_backward(dy, *saved, ctx.depth, ctx.activation,
                                                emulate_cuda=ctx.emulate_cuda, zero_goes_right=ctx.zero_goes_right)
        grads = [g if t is not None else None for g, t in zip(grads, saved)]
    return (*grads, None, None, None, None)


def leaf_tree_ffn_autograd(ctx, dy):
    saved = ctx.saved_tensors
    if torch.is_grad_enabled():
        grads = leaf_tree_ffn_backward(dy, *saved, ctx.depth, ctx.activation)
    else:
        grads = torch.ops.fff.leaf_tree_ffn_backward(dy, *saved, ctx.depth, ctx.activation,
                                                     emulate_cuda=ctx.emulate_cuda)
    return (*grads, None, None, None)




# fff::tree_sublayer: the norm's gradient runs on fff's trained-norm
# kernels (fff.layer_norm_grad, fff.rms_norm_grad), the tree's as above.

def _norm_forward(norm, rows, weight, bias, eps):
    """The norm of `rows` [B, D] and the statistics its backward reads."""
    if norm == "layer_norm":
        y, mean, rstd = torch.ops.fff.layer_norm_train(rows, weight, bias, 1, eps)
        return y, (mean, rstd)
    return torch.ops.fff.rms_norm_train(rows, weight, 1, eps), ()


def _norm_backward(norm, grad, rows, stats, weight, bias, eps):
    """dx, dweight, dbias (None where absent) of the norm of `rows`."""
    if norm == "layer_norm":
        dx, dweight, dbias = torch.ops.fff.layer_norm_train_backward(grad, rows, *stats, weight, 1,
                                                                      bias is not None, eps)
        return dx, dweight if weight is not None else None, dbias if bias is not None else None
    dx, dweight = torch.ops.fff.rms_norm_train_backward(grad, rows, weight, 1, eps)
    return dx, dweight if weight is not None else None, None


def _layer_forward(layer, rows, weights, depth, activation):
    op = torch.ops.fff.tree_ffn if layer == "tree_ffn" else torch.ops.fff.leaf_tree_ffn
    return op(rows, *weights, depth, activation)


def _layer_backward(layer, grad, rows, weights, depth, activation):
    """dx, then one gradient per weight (None for an absent bias)."""
    backward = tree_ffn_gradients if layer == "tree_ffn" else leaf_tree_ffn_gradients
    return backward(grad, rows, *weights, depth, activation)


@direct_op("fff::tree_sublayer_backward")
def tree_sublayer_backward_op(dy: torch.Tensor, x: torch.Tensor, residual: torch.Tensor, norm: str,
                              norm_weight: torch.Tensor | None, norm_bias: torch.Tensor | None, eps: float,
                              layer: str, weights: list[torch.Tensor | None], depth: int, activation: str,
                              order: str) -> list[torch.Tensor]:
    """dx, dresidual, dnorm_weight, dnorm_bias, then one gradient per
    weight, of fff::tree_sublayer (empty where absent). Order "pre",
    residual + layer(norm(x)): the norm is recomputed, the layer's gradient
    flows into the norm's, and dresidual, which is dy, is left empty (a
    result may not alias an input; the caller uses dy). Order "post",
    norm(residual + layer(x)): the layer and the add are recomputed, the
    norm's gradient is dresidual and flows into the layer's."""
    check_sublayer(x, residual, norm, norm_weight, norm_bias, layer, weights, depth, activation, order)
    check_output_grad("fff::tree_sublayer_backward", dy, x, residual.shape)
    count_backward("tree_sublayer_grad")
    rows, grad = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
    if order == "pre":
        normed, stats = _norm_forward(norm, rows, norm_weight, norm_bias, eps)
        layer_grads = _layer_backward(layer, grad, normed, weights, depth, activation)
        dx, dweight, dbias = _norm_backward(norm, layer_grads[0], rows, stats, norm_weight, norm_bias, eps)
        dresidual = x.new_empty(0)
    else:
        summed = residual.reshape(grad.shape) + _layer_forward(layer, rows, weights, depth, activation)
        _, stats = _norm_forward(norm, summed, norm_weight, norm_bias, eps)
        dresidual, dweight, dbias = _norm_backward(norm, grad, summed, stats, norm_weight, norm_bias, eps)
        layer_grads = _layer_backward(layer, dresidual, rows, weights, depth, activation)
        dx = layer_grads[0]
    dresidual = dresidual.reshape(residual.shape) if order == "post" else dresidual
    return [dx.reshape(x.shape), dresidual] + \
        [_present(g, x) for g in (dweight, dbias, *layer_grads[1:])]


@tree_sublayer_backward_op.register_fake
def _(dy, x, residual, norm, norm_weight, norm_bias, eps, layer, weights, depth, activation, order):
    return [_fresh(t, x) for t in (x, residual if order == "post" else None, norm_weight, norm_bias, *weights)]


def setup_tree_sublayer_context(ctx, inputs, output):
    x, residual, norm, norm_weight, norm_bias, eps, layer, weights, depth, activation, order = inputs
    ctx.save_for_backward(x, residual, norm_weight, norm_bias, *weights)
    ctx.norm, ctx.eps, ctx.layer, ctx.depth, ctx.activation, ctx.order = norm, eps, layer, depth, activation, order


def tree_sublayer_autograd(ctx, dy):
    if torch.is_grad_enabled():
        raise RuntimeError("fff::tree_sublayer has no double backward (backward(create_graph=True)): "
                           "call its norm and tree layer as separate ops for that")
    x, residual, norm_weight, norm_bias, *weights = ctx.saved_tensors
    grads = torch.ops.fff.tree_sublayer_backward(dy, x, residual, ctx.norm, norm_weight, norm_bias, ctx.eps,
                                                 ctx.layer, weights, ctx.depth, ctx.activation, ctx.order)
    present = [x, residual, norm_weight, norm_bias, *weights]
    dx, dresidual, dweight, dbias, *dweights = [g if t is not None else None for g, t in zip(grads, present)]
    dresidual = dy if ctx.order == "pre" else dresidual
    return dx, dresidual, None, dweight, dbias, None, None, dweights, None, None, None
