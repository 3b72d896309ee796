"""The device check's norm backward rows (device_check.py runs them): each
of fff_norm_grads.so's functions at the training benchmark's shapes
(4096x768, 16384x1024, 4096x4096; 5 rows on the emulator), checked against
torch.autograd in float64 (outputs poisoned with NaN first), then timed as
CUDA-graph replays side by side with:

  - a device-to-device copy of the same bytes (x, dy and dx, the
    parameters and their gradients, the row statistics);
  - PyTorch eager's backward kernels (aten.native_layer_norm_backward; for
    RMSNorm, aten._fused_rms_norm_backward where this torch has it, else
    the decomposed backward in eager ops);
  - torch.compile of the same backward (Inductor decomposes and fuses it as
    it does the backward graph of a training step);
  - Liger Kernel's backward, where `liger_kernel` is installed. It is
    timed on one input set (its saved forward holds one), which may sit in
    L2: a bias in its favour.

The fused rows (fused_*) are each backward as the unit of a pre-LN
training step with a dropout after the norm: fff's kernel reads the
incoming gradient and an i8 keep mask, computes dy = grad * (keep ? scale :
0) as it reads them, and writes dh = dresidual + dx in dx's place. Their
baselines compute the same: the masked product, the backward and the add
(Liger's backward between torch's product and add).

Bandwidth is bytes moved per second; `fff x` columns are the other time
over fff's.
"""

import math

import torch

# The widths of fff_norm_grads.so and the rows the shapes give them.
ROWS = {768: 4096, 1024: 16384, 4096: 4096}
# dgamma and dbeta sum over every row: f32 sums of thousands of terms.
GRAD_TOLERANCE = {"f32": 2e-5, "bf16": 8e-3}


def reference(spec, s):
    """dx, dgamma (and dbeta) of torch's norm in float64; for a fused unit,
    dh = dresidual + dx in dx's place, from the masked dy."""
    hidden = (spec["hidden"],)
    x = s["x"].double().requires_grad_()
    g = s["gamma"].double().requires_grad_()
    dy = masked_dy(spec, s).double() if "keep_scale" in spec else s["dy"].double()
    if spec["op"] == "layer_norm":
        b = torch.zeros_like(g, requires_grad=True)
        y = torch.nn.functional.layer_norm(x, hidden, g, b, spec["epsilon"])
        grads = torch.autograd.grad(y, (x, g, b), dy)
    else:
        y = torch.nn.functional.rms_norm(x, hidden, g, spec["epsilon"])
        grads = torch.autograd.grad(y, (x, g), dy)
    if "keep_scale" in spec:
        return (s["dresidual"].double() + grads[0],) + grads[1:]
    return grads


def masked_dy(spec, s):
    """The fused unit's dy, as its kernel computes it: in f32, the scale
    rounded to f32, then one rounding to the gradient's dtype."""
    scale = torch.tensor(spec["keep_scale"], dtype=torch.float32).item()
    return (s["grad"].float() * (s["keep"] != 0).float() * scale).to(s["grad"].dtype)


def rms_norm_backward(dy, x, rstd, gamma):
    """RMSNorm's backward as AOTAutograd decomposes a hand-written one."""
    xf, dyf = x.float(), dy.float()
    xhat = xf * rstd
    g = dyf * gamma.float()
    dx = rstd * (g - xhat * (g * xhat).mean(-1, keepdim=True))
    return dx.to(x.dtype), (dyf * xhat).sum(0).to(x.dtype)


def torch_backward(spec, s):
    """The backward alone, in torch ops, from the saved statistics; the
    fused RMSNorm kernel where this torch has one for this device and it
    takes `s` (else the decomposed backward)."""
    hidden = [spec["hidden"]]
    if spec["op"] == "layer_norm":
        return lambda s: torch.ops.aten.native_layer_norm_backward(
            s["dy"], s["x"], hidden, s["mean"], s["rstd"], s["gamma"], s["beta"], [True, True, True])
    fused = getattr(torch.ops.aten, "_fused_rms_norm_backward", None)
    if fused is not None:
        step = lambda s: fused(s["dy"], s["x"], hidden, s["rstd"], s["gamma"], [True, True])
        try:
            step(s)
            return step
        except (RuntimeError, NotImplementedError):
            pass
    return lambda s: rms_norm_backward(s["dy"], s["x"], s["rstd"], s["gamma"])


def fused_torch_step(spec, backward):
    """The fused unit's work in torch ops around `backward` (a step on a
    set's tensors by name that reads its "dy"): the masked product, the
    backward, and the residual gradient's add."""
    scale = spec["keep_scale"]

    def step(s):
        dy = s["grad"] * (s["keep"].to(s["grad"].dtype) * scale)
        grads = backward({**s, "dy": dy})
        return (s["dresidual"] + grads[0],) + tuple(grads[1:])
    return step


def liger_backward(spec, s):
    """Liger Kernel's backward alone (its autograd function, re-run from a
    saved forward graph), or None with why not."""
    try:
        if spec["op"] == "layer_norm":
            from liger_kernel.ops.layer_norm import LigerLayerNormFunction as function
            extra = (s["beta"], spec["epsilon"])
        else:
            from liger_kernel.ops.rms_norm import LigerRMSNormFunction as function
            extra = (spec["epsilon"],)
    except ImportError as error:
        return None, f"not installed ({error.name})"
    x = s["x"].detach().requires_grad_()
    gamma = s["gamma"].detach().requires_grad_()
    y = function.apply(x, gamma, *extra)
    backward = lambda t: torch.autograd.grad(y, (x, gamma), t["dy"], retain_graph=True)
    return (fused_torch_step(spec, backward) if "keep_scale" in spec else backward), ""


def run_case(h, spec):
    dtype = h.DTYPES[spec["dtype"]]
    hidden = spec["hidden"]
    fused = "keep_scale" in spec
    rows = h.options.rows[0] if h.emulator else ROWS[hidden]
    function = getattr(h.grad_library, spec["function"])
    element = torch.finfo(dtype).bits // 8
    params = 3 if spec["op"] == "layer_norm" else 2
    # x, dy and dx; fused: x, the gradient, the residual gradient and dh,
    # and the mask's bytes.
    row_bytes = (4 * element + 1) if fused else 3 * element
    bytes_moved = rows * hidden * row_bytes + 2 * params * hidden * element + 8 * rows
    sets = []
    for _ in range(1 if h.emulator else max(1, math.ceil(3 * h.L2_BYTES / bytes_moved))):
        x = torch.randn(rows, hidden, device=h.DEVICE, dtype=dtype) * 2 + 0.5
        xf = x.float()
        mean = xf.mean(-1, keepdim=True)
        if spec["op"] == "layer_norm":
            rstd = torch.rsqrt(((xf - mean) ** 2).mean(-1, keepdim=True) + spec["epsilon"])
        else:
            rstd = torch.rsqrt((xf * xf).mean(-1, keepdim=True) + spec["epsilon"])
        sets.append({
            "x": x, "dy": torch.randn(rows, hidden, device=h.DEVICE, dtype=dtype), "mean": mean, "rstd": rstd,
            "gamma": torch.randn(hidden, device=h.DEVICE, dtype=dtype),
            "beta": torch.randn(hidden, device=h.DEVICE, dtype=dtype),
            "dx": torch.full((rows, hidden), float("nan"), device=h.DEVICE, dtype=dtype),
            "dgamma": torch.full((hidden,), float("nan"), device=h.DEVICE, dtype=dtype),
            "dbeta": torch.full((hidden,), float("nan"), device=h.DEVICE, dtype=dtype),
            "src": torch.empty(bytes_moved // 2, device=h.DEVICE, dtype=torch.uint8),
            "dst": torch.empty(bytes_moved // 2, device=h.DEVICE, dtype=torch.uint8),
        })
        if fused:
            sets[-1].update({
                "grad": sets[-1]["dy"], "keep": (torch.rand(rows, hidden, device=h.DEVICE) < 0.9).to(torch.int8),
                "dresidual": torch.randn(rows, hidden, device=h.DEVICE, dtype=dtype),
                "dh": torch.full((rows, hidden), float("nan"), device=h.DEVICE, dtype=dtype)})
        if len(sets) * bytes_moved > (8 << 30):
            break
    outputs = [name for name in ("dx", "dh", "dgamma", "dbeta") if name in spec["args"]]

    def fff_step(s):
        h.call_fff(function, spec["args"], s, outputs=outputs)

    h.set_stream(None if h.emulator else torch.cuda.current_stream())
    s = sets[0]
    fff_step(s)
    h.synchronize()
    h.check_error(spec["function"], h.grad_library)
    errors = []
    for name, ref in zip(outputs, reference(spec, s)):
        got = s[name].double()
        errors.append(((got - ref).norm() / ref.norm()).item() if torch.isfinite(got).all() else float("inf"))
    error = max(errors)
    ok = error <= GRAD_TOLERANCE[spec["dtype"]]
    case = f"{'fused ' if fused else ''}{spec['op']}_grad {rows}x{hidden} {spec['dtype']}"
    if h.emulator:
        return {"case": case, "ok": ok, "error": error}

    eager = torch_backward(spec, s)
    if fused:
        eager = fused_torch_step(spec, eager)
    compiled = torch.compile(eager)
    copy_us = h.graph_time_us(lambda s: s["dst"].copy_(s["src"]), sets)
    fff_us = h.graph_time_us(fff_step, sets)
    h.check_error(spec["function"], h.grad_library)
    eager_us = h.graph_time_us(eager, sets)
    compiled_us = h.graph_time_us(compiled, sets)
    liger, why_not = liger_backward(spec, s)
    liger_us = float("nan")
    if liger is not None:
        try:
            liger_us = h.graph_time_us(lambda t: liger(s), [s])
        except Exception as error:  # a Liger or capture failure is reported, not fatal
            why_not = f"failed ({type(error).__name__}: {error})"
    gbs = lambda us: bytes_moved / us / 1e3
    return {"case": case, "ok": ok, "error": error, "fff_us": fff_us, "gbs": gbs(fff_us),
            "copy_fraction": copy_us / fff_us, "eager_gbs": gbs(eager_us), "compile_gbs": gbs(compiled_us),
            "liger_gbs": gbs(liger_us), "vs_eager": eager_us / fff_us, "vs_compile": compiled_us / fff_us,
            "vs_liger": liger_us / fff_us, "liger_note": why_not}


def run(h):
    """Every norm backward case of the build; returns the wrong ones."""
    results = []
    print("\n| norm backward | correct (rel. err) | fff us | GB/s | of copy | eager GB/s | compile GB/s | "
          "Liger GB/s | fff x eager | fff x compile | fff x Liger |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for spec in h.manifest["grad_functions"] + h.manifest.get("fused_grad_functions", []):
        r = run_case(h, spec)
        results.append(r)
        if h.emulator:
            print(f"| {r['case']} | {'yes' if r['ok'] else 'NO'} ({r['error']:.1e}) | | | | | | | | | |", flush=True)
            continue
        print(f"| {r['case']} | {'yes' if r['ok'] else 'NO'} ({r['error']:.1e}) | {r['fff_us']:.1f} | "
              f"{r['gbs']:.0f} | {r['copy_fraction']:.0%} | {r['eager_gbs']:.0f} | {r['compile_gbs']:.0f} | "
              f"{r['liger_gbs']:.0f} | {r['vs_eager']:.2f} | {r['vs_compile']:.2f} | {r['vs_liger']:.2f} |",
              flush=True)
    wrong = [r["case"] for r in results if not r["ok"]]
    print(f"\n{len(results)} norm backward cases; wrong: {len(wrong)}")
    if not h.emulator and results:
        geomean = math.exp(sum(math.log(r["vs_compile"]) for r in results) / len(results))
        print(f"geomean speedup vs torch.compile's backward: {geomean:.2f}x")
        notes = sorted({r["liger_note"] for r in results if r["liger_note"]})
        if notes:
            print(f"Liger Kernel: {'; '.join(notes)}")
    return wrong
