"""fff's custom ops keep the contract that fff.torch._ops.direct_op's
kernels rely on, as torch.library.opcheck states it: a schema that
matches what the kernel does (no result is an input or a view of one),
fake kernels that agree with the real ones, autograd registered where the
op has a gradient, and tracing through AOTAutograd with dynamic shapes."""

import pytest

torch = pytest.importorskip("torch")

import fff.torch  # noqa: E402,F401


def _tree(depth=2, trees=2, din=12, dout=10, grad=False):
    nodes = 2 ** (depth + 1) - 1
    tensors = [torch.randn(5, din), torch.randn(trees, nodes, din), torch.randn(trees, nodes),
               torch.randn(trees, nodes, dout), torch.randn(dout)]
    return [t.requires_grad_(grad) for t in tensors]


def _leaf(depth=2, din=12, width=6, dout=10):
    nodes, leaves = 2 ** depth - 1, 2 ** depth
    return [torch.randn(5, din), torch.randn(nodes, din), torch.randn(nodes), torch.randn(leaves, din, width),
            torch.randn(leaves, width), torch.randn(leaves, width, dout), torch.randn(leaves, dout)]


def _cases():
    torch.manual_seed(0)
    x, w, b = torch.randn(2, 3, 16), torch.randn(16), torch.randn(16)
    dy = torch.randn(2, 3, 16)
    mean, rstd = x.mean(-1, keepdim=True), (x.var(-1, unbiased=False, keepdim=True) + 1e-5).rsqrt()
    tree, tree_dy = _tree(), torch.randn(5, 10)
    leaf = _leaf()
    sublayer_x, residual = torch.randn(5, 12), torch.randn(5, 10)
    ops = torch.ops.fff
    return {
        "layer_norm_train": (ops.layer_norm_train.default,
                             (x.requires_grad_(), w.requires_grad_(), b.requires_grad_(), 1, 1e-5)),
        "rms_norm_train": (ops.rms_norm_train.default, (x, w, 1, 1e-6)),
        "layer_norm_train_backward": (ops.layer_norm_train_backward.default,
                                      (dy, x.detach(), mean, rstd, w.detach(), 1, True, 1e-5)),
        "rms_norm_train_backward": (ops.rms_norm_train_backward.default,
                                    (dy, x.detach(), w.detach(), 1, 1e-6), {"residual_grad": torch.randn(2, 3, 16)}),
        "tree_ffn": (ops.tree_ffn.default, (*_tree(grad=True), 2)),
        "tree_ffn_backward": (ops.tree_ffn_backward.default, (tree_dy, *tree, 2, "gelu")),
        "leaf_tree_ffn": (ops.leaf_tree_ffn.default, (*leaf, 2)),
        "leaf_tree_ffn_backward": (ops.leaf_tree_ffn_backward.default, (tree_dy, *leaf, 2, "relu")),
        "tree_sublayer": (ops.tree_sublayer.default,
                          (sublayer_x, residual, "layer_norm", torch.randn(12), torch.randn(12), 1e-5, "tree_ffn",
                           _tree()[1:], 2, "gelu")),
        "tree_sublayer_backward": (ops.tree_sublayer_backward.default,
                                   (tree_dy, sublayer_x, residual, "rms_norm", torch.randn(12), None, 1e-6,
                                    "tree_ffn", _tree()[1:], 2, "gelu", "pre")),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_op_keeps_torch_librarys_contract(name):
    op, args, *kwargs = _cases()[name]
    results = torch.library.opcheck(op, args, kwargs[0] if kwargs else None)
    assert set(results.values()) == {"SUCCESS"}, results
