"""IR from a torch-mlir export through fff from Python: the module as the
frontend wrote it (a pre-LN feedforward sublayer, norms decomposed into
linalg) is compiled, raised and fused on the way, and run on torch tensors
against torch's own forward."""

import re

import pytest

import fff

torch = pytest.importorskip("torch")
fx = pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")


class PreLNBlock(torch.nn.Module):
    def __init__(self, hidden, width):
        super().__init__()
        self.ln = torch.nn.LayerNorm(hidden)
        self.fc1 = torch.nn.Linear(hidden, width)
        self.fc2 = torch.nn.Linear(width, hidden)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln(x))))


class LlamaRMSNorm(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(hidden) * 0.5 + 1.0)

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * x.to(dtype)


def export(module, example):
    module.eval()
    batch = torch.export.Dim("batch", min=1)
    return str(fx.export_and_import(module, example, output_type="linalg-on-tensors",
                                    func_name="forward", dynamic_shapes={"x": {0: batch}}))


@pytest.mark.parametrize("make, example, tolerance", [
    (lambda: PreLNBlock(64, 256), lambda: torch.randn(5, 64), 1e-5),
    (lambda: LlamaRMSNorm(128).to(torch.bfloat16), lambda: torch.randn(3, 128).to(torch.bfloat16), 1e-2),
])
def test_export_round_trip(make, example, tolerance):
    torch.manual_seed(0)
    module, x = make(), example()
    ir = export(module, x)
    # The raising found the norm in the frontend's IR.
    assert re.search(r"fff\.(layer_norm|rms_norm)", fff.lower(ir, "builtin.module(fff-raise-norms)"))
    exe = fff.compile(ir)
    x = example()
    y = exe.forward(x)
    with torch.no_grad():
        expected = module(x).double()
    error = ((y.double() - expected).norm() / expected.norm()).item()
    assert error < tolerance
