"""The gradient of fff::tree_ffn, in torch ops (not yet fff kernels).

UltraFastBERT's training semantics (shared/DESIGN.md, "Gradients"): the
gradient of its masked dense layer, whose values equal the op's. Routing is
hard and gets no gradient. For each row b, tree k and node n on b's path,
with logit l:

    dw_out[k, n] += act(l) * dy[b]          dl = dot(dy[b], w_out[k, n]) * act'(l)
    dx[b]        += dl * w_in[k, n]         dw_in[k, n] += dl * x[b]
    db_in[k, n]  += dl                      db_out = sum over b of dy[b]

The backward walks each row's path again (the forward saves nothing but its
inputs) and touches only the visited rows of the weights: depth + 1 rows per
tree and token, as the forward does. It computes in f32 and returns each
gradient in its tensor's dtype; the weight gradients are dense tensors.
The path is recomputed in torch's arithmetic: a logit within rounding of
0 may route differently from the kernel's forward (both send exactly 0
left).
"""

import math

import torch

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


def tree_paths(x, w_in, b_in, depth):
    """Each row's node and logit per tree and level: [B, K, depth+1] int64
    and x's dtype, for rows x [B, Din]. A logit of exactly 0 goes left, as
    in the op."""
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
        node = 2 * node + 1 + (logit > 0).to(torch.int64)
    return torch.stack(nodes, -1), torch.stack(logits, -1)


def tree_ffn_backward(dy, x, w_in, b_in, w_out, b_out, depth, activation):
    """(dx, dw_in, db_in, dw_out, db_out) of fff::tree_ffn for the output
    gradient dy; None for an absent bias."""
    din, dout = x.shape[-1], w_out.shape[2]
    trees, count = w_in.shape[0], w_in.shape[1]
    # f32 arithmetic, as the forward's; float64 for float64 inputs (the
    # gradient checks).
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    rows = x.reshape(-1, din).to(compute)
    grad = dy.reshape(-1, dout).to(compute)
    nodes, logits = tree_paths(rows, w_in, b_in, depth)
    act, slope = _activation_and_slope(activation, logits)
    # Rows of the weights flattened to [K * N, ...]: tree k's node n is row
    # k * N + n. A level at a time, so that memory stays at a row per token
    # and tree.
    flat = torch.arange(trees, device=x.device).view(1, trees, 1) * count + nodes
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


def setup_tree_ffn_context(ctx, inputs, output):
    x, w_in, b_in, w_out, b_out, depth, activation = inputs
    ctx.save_for_backward(x, w_in, b_in, w_out, b_out)
    ctx.depth, ctx.activation = depth, activation


def tree_ffn_autograd(ctx, dy):
    x, w_in, b_in, w_out, b_out = ctx.saved_tensors
    grads = tree_ffn_backward(dy, x, w_in, b_in, w_out, b_out, ctx.depth, ctx.activation)
    return (*grads, None, None)
