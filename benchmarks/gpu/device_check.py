#!/usr/bin/env python3
"""The device check: runs every GPU kernel fff generates on an NVIDIA GPU,
checks it against PyTorch in float64, and times it side by side with what a
user would otherwise run.

  - norms: against a device-to-device copy, PyTorch eager and torch.compile;
  - tree layers: against the dense feedforward tree_ffn replaces (Linear
    D->4D, GELU, Linear 4D->D, in bf16 and in f32 with TF32), and an
    UltraFastBERT-style FFF in PyTorch (index_select and bmm per level);
    then an ablation: the latency kernel alone, the throughput kernel alone,
    and the throughput kernel without staged rows, at every batch;
  - the norms' backward (norm_grad_check.py): against a copy of the same
    bytes, PyTorch eager's backward kernels, torch.compile of the same
    backward, and Liger Kernel's where it is installed;
  - tree training steps (tree_grad_check.py): fff's tree_ffn and
    tree_ffn_grad against the authors' masked dense layer under eager and
    torch.compile, and the dense feedforward's step; a leaf tree's
    (leaf_tree_ffn and leaf_tree_ffn_grad) against its leaves gathered per
    row under eager and torch.compile, and the dense step;
  - FFN sublayers, each one fused kernel (pre-LN x + tree(LN(x)), post-LN
    LN(x + tree(x))), and a whole pre-LN block of two sublayers: against
    the same math in PyTorch eager and torch.compile, and against the dense
    sublayer a tree replaces, compiled.

Build on a machine with fff (no GPU needed), then carry benchmarks/gpu/out:

    python3 benchmarks/gpu/build.py
    python3 benchmarks/gpu/device_check.py            # on the GPU machine
    python3 benchmarks/gpu/device_check.py --list     # anywhere: check the build
    python3 benchmarks/gpu/device_check.py --emulate  # anywhere: run it on fff's PTX emulator

Needs only python3 with torch (and its CUDA runtime) on the GPU machine.
Prints markdown tables; `fff x` columns are the other implementation's time
over fff's (>1: fff is faster).

With --emulate the same harness runs on the machine it is built on: torch
tensors live on the CPU, each fff call copies them into fff's PTX emulator
(build/lib/libfff_cuda_emulator.so, loaded as the CUDA driver) and its
output back, on tiny shapes; the results are checked as on a GPU, and
nothing is timed.
"""

import argparse
import ctypes
import json
import math
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--out", default=os.path.join(here, "out"), help="what build.py made")
parser.add_argument("--list", action="store_true", help="check the library exports every kernel, then stop")
parser.add_argument("--quick", action="store_true", help="one row count, fewer repetitions")
parser.add_argument("--rows", type=int, nargs="*", default=[4096, 16384, 32768])
parser.add_argument("--batches", type=int, nargs="*", default=[1, 16, 256, 4096, 16384],
                    help="tokens per tree layer call")
parser.add_argument("--only", choices=["norms", "norm_grads", "trees", "tree_grads", "sublayers"],
                    help="run one part")
parser.add_argument("--emulate", nargs="?", metavar="DRIVER",
                    const=os.path.join(here, "..", "..", "build", "lib", "libfff_cuda_emulator.so"),
                    help="run on fff's PTX emulator (tiny shapes, no timing)")
options = parser.parse_args()
if options.emulate:
    # Before the libraries load: each loads its kernels through this driver.
    options.emulate = os.path.abspath(options.emulate)
    os.environ["FFF_CUDA_DRIVER"] = options.emulate
    options.rows = [5]
    options.batches = [1, 3]

manifest = json.load(open(os.path.join(options.out, "manifest.json")))


def load(name):
    library = ctypes.CDLL(os.path.join(options.out, name))
    library.fffGetLastError.restype = ctypes.c_char_p
    library.fffSetStream.argtypes = [ctypes.c_void_p]
    return library


library = load(manifest["library"])
tree_libraries = {variant: load(name) for variant, name in manifest["tree_libraries"].items()}
sublayer_library = load(manifest["sublayer_library"])
grad_library = load(manifest["grad_library"])
tree_grad_library = load(manifest["tree_grad_library"])
missing = [f["function"] for f in manifest["functions"] if not hasattr(library, f["function"])]
missing += [f"{f['function']} ({variant})" for f in manifest["tree_functions"]
            for variant, lib in tree_libraries.items() if not hasattr(lib, f["function"])]
missing += [f["function"] for f in manifest["sublayer_functions"] if not hasattr(sublayer_library, f["function"])]
missing += [f["function"] for f in manifest["grad_functions"] if not hasattr(grad_library, f["function"])]
missing += [name for f in manifest["tree_grad_functions"] for name in (f["function"], f["forward"])
            if not hasattr(tree_grad_library, name)]
if missing:
    sys.exit(f"the libraries lack {missing}")
if options.list:
    for f in manifest["functions"]:
        print(f"{f['function']:<24} {f['op']:<10} {f['dtype']:<4} hidden={f['hidden']} args={','.join(f['args'])}")
    print(f"{len(manifest['functions'])} kernels exported by {manifest['library']} ({manifest['chip']})")
    for f in manifest["tree_functions"]:
        print(f"{f['function']:<30} {f['op']:<13} {f['dtype']:<4} width={f['width']} depth={f['depth']} "
              f"args={','.join(f['args'])}")
    print(f"{len(manifest['tree_functions'])} tree functions exported by "
          f"{', '.join(manifest['tree_libraries'].values())} ({manifest['chip']})")
    for f in manifest["sublayer_functions"]:
        print(f"{f['function']:<36} {f['form']:<8} {f['dtype']:<4} width={f['width']} args={','.join(f['args'])}")
    print(f"{len(manifest['sublayer_functions'])} sublayer functions exported by {manifest['sublayer_library']} "
          f"({manifest['chip']})")
    print(f"{len(manifest['grad_functions'])} norm backward functions exported by {manifest['grad_library']} "
          f"({manifest['chip']})")
    print(f"{len(manifest['tree_grad_functions'])} tree training steps exported by "
          f"{manifest['tree_grad_library']} ({manifest['chip']})")
    sys.exit(0)

import torch  # noqa: E402  (only the GPU run needs it)
import torch.nn.functional as F  # noqa: E402

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
# ||y - ref|| / ||ref|| against float64 on the same (upcast) inputs: f32
# arithmetic lands far under 1e-5; bf16 outputs carry one rounding (~2e-3).
TOLERANCE = {"f32": 1e-5, "bf16": 8e-3}
L2_BYTES = 60 << 20


class Emulator:
    """fff's PTX emulator as the device: a call's tensors (on the CPU) are
    copied into the emulator's memory, and its output back."""

    # Cases whose weights exceed this are too slow to copy and emulate.
    MAX_WEIGHT_BYTES = 64 << 20

    def __init__(self, path):
        lib = self.lib = ctypes.CDLL(path)
        lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        lib.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
        lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
        context = ctypes.c_void_p()
        if lib.cuInit(0) or lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0):
            sys.exit(f"cannot start the emulator {path}")
        lib.cuCtxSetCurrent(context)

    def call(self, function, tensors, outputs):
        buffers = []
        args = []
        for tensor in tensors:
            nbytes = tensor.numel() * tensor.element_size()
            pointer = ctypes.c_uint64()
            if self.lib.cuMemAlloc_v2(ctypes.byref(pointer), max(nbytes, 1)) or \
                    self.lib.cuMemcpyHtoD_v2(pointer.value, tensor.data_ptr(), nbytes):
                sys.exit("the emulator could not take a tensor")
            buffers.append((pointer.value, tensor, nbytes))
            args += memref_args(tensor, pointer.value)
        function(*args)
        for pointer, tensor, nbytes in buffers:
            if any(tensor is output for output in outputs):
                self.lib.cuMemcpyDtoH_v2(tensor.data_ptr(), pointer, nbytes)
            self.lib.cuMemFree_v2(pointer)


emulator = Emulator(options.emulate) if options.emulate else None
DEVICE = "cpu" if emulator else "cuda"


def memref_args(tensor, pointer=None):
    """MLIR's memref ABI: allocated and aligned pointers, offset, sizes,
    strides; `pointer` (the tensor's own by default) is where the data is."""
    pointer = ctypes.c_void_p(tensor.data_ptr() if pointer is None else pointer)
    return [pointer, pointer, ctypes.c_int64(0)] + [ctypes.c_int64(s) for s in tensor.shape] + \
        [ctypes.c_int64(s) for s in tensor.stride()]


def call_fff(function, names, s, outputs=("y",)):
    """Calls an fff function on the tensors of `s` named by `names` (its
    memref arguments in order; those named in `outputs` are written)."""
    tensors = [s[name] for name in names]
    if emulator:
        emulator.call(function, tensors, outputs=[s[name] for name in outputs])
    else:
        function(*[a for tensor in tensors for a in memref_args(tensor)])


def synchronize():
    if not emulator:
        torch.cuda.synchronize()


def check_error(what, lib=None):
    error = (lib or library).fffGetLastError()
    if error is not None:
        sys.exit(f"{what}: {error.decode()}")


def set_stream(stream):
    """fff's runtime launches on this stream; each library has its own."""
    if emulator:
        return
    for lib in [library, *tree_libraries.values(), sublayer_library, grad_library, tree_grad_library]:
        lib.fffSetStream(ctypes.c_void_p(stream.cuda_stream))


def graph_time_us(step, sets, calls=20, replays=10):
    """Median time of one step, from CUDA-graph replays of `calls` steps that
    rotate over `sets` input sets (so that inputs do not sit in L2); not a
    number on the emulator."""
    if emulator:
        return float("nan")
    for i in range(3):
        step(sets[i % len(sets)])
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        set_stream(stream)
        with torch.cuda.graph(graph, stream=stream):
            for i in range(calls):
                step(sets[i % len(sets)])
    set_stream(torch.cuda.current_stream())
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return sorted(times)[len(times) // 2]


def reference(spec, x, gamma, beta):
    x64, g64 = x.double(), gamma.double()
    if spec["op"] == "layer_norm":
        return F.layer_norm(x64, (spec["hidden"],), g64, beta.double(), spec["epsilon"])
    return x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + spec["epsilon"]) * g64


def torch_norm(spec):
    hidden, eps = spec["hidden"], spec["epsilon"]
    if spec["op"] == "layer_norm":
        return lambda s: F.layer_norm(s["x"], (hidden,), s["gamma"], s["beta"], eps)
    return lambda s: F.rms_norm(s["x"], (hidden,), s["gamma"], eps)


compiled_norms = {}


def run_case(spec, rows):
    dtype = DTYPES[spec["dtype"]]
    hidden = spec["hidden"]
    function = getattr(library, spec["function"])
    bytes_moved = 2 * rows * hidden * torch.finfo(dtype).bits // 8
    sets = []
    for _ in range(1 if emulator else max(1, math.ceil(3 * L2_BYTES / bytes_moved))):
        sets.append({
            "x": torch.randn(rows, hidden, device=DEVICE, dtype=dtype) * 2 + 0.5,
            "gamma": torch.randn(hidden, device=DEVICE, dtype=dtype),
            "beta": torch.randn(hidden, device=DEVICE, dtype=dtype),
            "y": torch.full((rows, hidden), float("nan"), device=DEVICE, dtype=dtype),
        })
        if len(sets) * bytes_moved > (8 << 30):
            break

    def fff_step(s):
        call_fff(function, spec["args"], s)

    # Correctness on fresh data, output poisoned with NaN beforehand.
    set_stream(None if emulator else torch.cuda.current_stream())
    s = sets[0]
    fff_step(s)
    synchronize()
    check_error(spec["function"])
    ref = reference(spec, s["x"], s["gamma"], s["beta"])
    y = s["y"].double()
    error = ((y - ref).norm() / ref.norm()).item() if torch.isfinite(y).all() else float("inf")
    ok = error <= TOLERANCE[spec["dtype"]]

    eager = torch_norm(spec)
    # One compiled function per kernel, reused across row counts: after the
    # second shape torch.compile generalizes to a dynamic batch instead of
    # recompiling for each.
    compiled = compiled_norms.setdefault(spec["function"], torch.compile(eager))
    copy_us = graph_time_us(lambda s: s["y"].copy_(s["x"]), sets)
    fff_us = graph_time_us(fff_step, sets)
    check_error(spec["function"])
    eager_us = graph_time_us(eager, sets)
    compiled_us = graph_time_us(compiled, sets)
    return {"case": f"{spec['op']} {rows}x{hidden} {spec['dtype']}", "ok": ok, "error": error,
            "fff_us": fff_us, "gbs": bytes_moved / fff_us / 1e3, "copy_fraction": copy_us / fff_us,
            "vs_eager": eager_us / fff_us, "vs_compile": compiled_us / fff_us, "hidden": hidden}


#
# Tree layers
#

# The routes of a float64 reference and of an f32 kernel may part where a
# logit is within rounding of zero; rows with such a logit are left out of
# the comparison (the fraction compared is printed).
ROUTE_MARGIN = 1e-3


def stable_rows_error(y, ref, stable):
    """||y - ref|| / ||ref|| over the rows whose routes are unambiguous; inf
    when y holds a non-finite value."""
    y = y.double()[stable]
    if not torch.isfinite(y).all():
        return float("inf")
    return ((y - ref[stable]).norm() / ref[stable].norm()).item()


def enough_rows_compared(stable, batch):
    """Along a path of 12 levels, about a quarter of random rows meet a logit
    within the margin; fewer than half compared means something is off,
    where there are rows enough to say so."""
    return stable.any().item() and (batch < 64 or stable.float().mean().item() > 0.5)


def tree_inputs(spec, batch, sets):
    """Weights as a trained layer would have them (scaled so that logits and
    outputs are O(1)), and `sets` input/output pairs."""
    dtype, width, depth = DTYPES[spec["dtype"]], spec["width"], spec["depth"]

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, device=DEVICE) * scale).to(dtype)

    if spec["op"] == "tree_ffn":
        nodes = 2 ** (depth + 1) - 1
        weights = {"w_in": randn(1, nodes, width, scale=width ** -0.5), "b_in": randn(1, nodes, scale=0.3),
                   "w_out": randn(1, nodes, width, scale=(depth + 1) ** -0.5), "b_out": randn(width, scale=0.1)}
    else:
        leaves, hidden = 2 ** depth, spec["leaf_width"]
        weights = {"node_w": randn(leaves - 1, width, scale=width ** -0.5), "node_b": randn(leaves - 1, scale=0.3),
                   "w1": randn(leaves, width, hidden, scale=width ** -0.5), "b1": randn(leaves, hidden, scale=0.3),
                   "w2": randn(leaves, hidden, width, scale=hidden ** -0.5), "b2": randn(leaves, width, scale=0.1)}
    return [dict(weights, x=randn(batch, width), y=torch.full((batch, width), float("nan"), device=DEVICE,
                                                               dtype=dtype)) for _ in range(sets)]


def leaf_activation(spec):
    """The leaves' activation: ReLU, as build.py compiles the tree layers,
    unless the spec names GELU."""
    return F.gelu if spec.get("activation") == "gelu" else torch.relu


def tree_reference(spec, s):
    """float64, all rows at once (unlike the kernels' warp per row); returns
    y and a mask of the rows whose route is unambiguous."""
    x = s["x"].double()
    rows = x.shape[0]
    node = torch.zeros(rows, dtype=torch.long, device=DEVICE)
    stable = torch.ones(rows, dtype=torch.bool, device=DEVICE)
    margin = ROUTE_MARGIN * x.norm(dim=1)
    if spec["op"] == "tree_ffn":
        # Rows gathered before widening: the weights can be large.
        w_in, b_in, w_out = s["w_in"][0], s["b_in"][0], s["w_out"][0]
        y = s["b_out"].double().expand(rows, -1).clone()
        for _ in range(spec["depth"] + 1):
            w = w_in[node].double()
            logit = (x * w).sum(1) + b_in[node].double()
            stable &= logit.abs() > margin * w.norm(dim=1)
            y += F.gelu(logit)[:, None] * w_out[node].double()
            node = 2 * node + 1 + (logit > 0).long()
        return y, stable
    node_w, node_b = s["node_w"], s["node_b"]
    for _ in range(spec["depth"]):
        w = node_w[node].double()
        score = (x * w).sum(1) + node_b[node].double()
        stable &= score.abs() > margin * w.norm(dim=1)
        node = 2 * node + 1 + (score >= 0).long()
    leaf = node - (2 ** spec["depth"] - 1)
    hidden = leaf_activation(spec)(torch.einsum("bi,biw->bw", x, s["w1"][leaf].double()) + s["b1"][leaf].double())
    return torch.einsum("bw,bwo->bo", hidden, s["w2"][leaf].double()) + s["b2"][leaf].double(), stable


def torch_fff(spec):
    """The tree layer in PyTorch as UltraFastBERT's reference code does it: per
    level, gather each row's node weights (index_select) and take the dot
    products with a batched matmul."""
    depth = spec["depth"]
    if spec["op"] == "tree_ffn":
        def step(s):
            x = s["x"]
            node = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
            y = s["b_out"].expand_as(x)
            for _ in range(depth + 1):
                w = s["w_in"][0].index_select(0, node)
                logit = torch.bmm(x.unsqueeze(1), w.unsqueeze(2)).view(-1) + s["b_in"][0].index_select(0, node)
                y = y + F.gelu(logit).unsqueeze(1) * s["w_out"][0].index_select(0, node)
                node = 2 * node + 1 + (logit > 0).long()
            return y
        return step

    def leaf_step(s):
        x = s["x"]
        node = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
        for _ in range(depth):
            w = s["node_w"].index_select(0, node)
            score = torch.bmm(x.unsqueeze(1), w.unsqueeze(2)).view(-1) + s["node_b"].index_select(0, node)
            node = 2 * node + 1 + (score >= 0).long()
        leaf = node - (2 ** depth - 1)
        hidden = leaf_activation(spec)(torch.bmm(x.unsqueeze(1), s["w1"].index_select(0, leaf)).squeeze(1)
                            + s["b1"].index_select(0, leaf))
        return torch.bmm(hidden.unsqueeze(1), s["w2"].index_select(0, leaf)).squeeze(1) + s["b2"].index_select(0, leaf)
    return leaf_step


dense_weights = {}


def dense_ff(width, dtype):
    """The feedforward a tree_ffn of this width replaces: Linear(D, 4D), GELU,
    Linear(4D, D). f32 runs with TF32 matmuls, as torch users enable."""
    key = (width, dtype)
    if key not in dense_weights:
        dense_weights[key] = (torch.randn(4 * width, width, device=DEVICE).mul(width ** -0.5).to(dtype),
                              torch.zeros(4 * width, device=DEVICE, dtype=dtype),
                              torch.randn(width, 4 * width, device=DEVICE).mul((4 * width) ** -0.5).to(dtype),
                              torch.zeros(width, device=DEVICE, dtype=dtype))
    w1, b1, w2, b2 = dense_weights[key]
    return lambda s: F.linear(F.gelu(F.linear(s[f"x_{dtype}"], w1, b1)), w2, b2)


def weight_bytes(spec):
    """The bytes of a tree layer's weights."""
    element = torch.finfo(DTYPES[spec["dtype"]]).bits // 8
    width, depth = spec["width"], spec["depth"]
    if spec["op"] == "tree_ffn":
        return (2 ** (depth + 1) - 1) * (2 * width + 1) * element
    return ((2 ** depth - 1) * (width + 1) + 2 ** depth * (2 * spec["leaf_width"] * width + spec["leaf_width"] + width)) * element


def run_tree_case(spec, batch):
    width, depth = spec["width"], spec["depth"]
    sets = tree_inputs(spec, batch, sets=1 if emulator else 4)
    for s in sets:
        s["x_torch.bfloat16"] = s["x"].to(torch.bfloat16)
        s["x_torch.float32"] = s["x"].float()

    def fff_step(lib):
        function = getattr(lib, spec["function"])
        return lambda s: call_fff(function, spec["args"], s)

    # Every variant's kernel, on the same inputs, output poisoned with NaN.
    set_stream(None if emulator else torch.cuda.current_stream())
    s = sets[0]
    ref, stable = tree_reference(spec, s)
    error = 0.0
    for variant, lib in tree_libraries.items():
        s["y"].fill_(float("nan"))
        fff_step(lib)(s)
        synchronize()
        check_error(f"{spec['function']} ({variant})", lib)
        error = max(error, stable_rows_error(s["y"], ref, stable))
    ok = error <= TOLERANCE[spec["dtype"]] and enough_rows_compared(stable, batch)

    times = {variant: graph_time_us(fff_step(lib), sets) for variant, lib in tree_libraries.items()}
    for variant, lib in tree_libraries.items():
        check_error(f"{spec['function']} ({variant})", lib)
    fff_us = times["auto"]
    element = torch.finfo(DTYPES[spec["dtype"]]).bits // 8
    if spec["op"] == "tree_ffn":
        visited = depth + 1
        flops = 2 * batch * visited * 2 * width
        weight_bytes = batch * visited * (2 * width + 1) * element
    else:
        visited = spec["leaf_width"]
        flops = 2 * batch * (depth * width + 2 * visited * width)
        weight_bytes = batch * (depth * width + 2 * visited * width) * element
    result = {"case": f"{spec['function']} B={batch}", "spec": spec, "batch": batch, "ok": ok, "error": error,
              "stable": stable.float().mean().item(), "fff_us": fff_us, "times": times,
              "gbs": (weight_bytes + 2 * batch * width * element) / fff_us / 1e3,
              "tflops": flops / fff_us / 1e6,
              "vs_fff_torch": graph_time_us(torch_fff(spec), sets) / fff_us}
    if spec["op"] == "tree_ffn":
        result["vs_dense_bf16"] = graph_time_us(dense_ff(width, torch.bfloat16), sets) / fff_us
        result["vs_dense_tf32"] = graph_time_us(dense_ff(width, torch.float32), sets) / fff_us
    return result


def run_trees():
    if not emulator:
        torch.backends.cuda.matmul.allow_tf32 = True
    batches = [1, 4096] if options.quick else options.batches
    results = []
    print("\n| tree layer | correct (worst rel. err of the 4 builds, rows compared) | fff us | GB/s | TFLOP/s | "
          "fff x dense bf16 | fff x dense tf32 | fff x torch FFF |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for spec in manifest["tree_functions"]:
        if emulator and weight_bytes(spec) > Emulator.MAX_WEIGHT_BYTES:
            print(f"| {spec['function']} | skipped: {weight_bytes(spec) >> 20} MB of weights is too much to emulate "
                  "| | | | | | |")
            continue
        for batch in batches:
            r = run_tree_case(spec, batch)
            results.append(r)
            dense = (f"{r['vs_dense_bf16']:.2f} | {r['vs_dense_tf32']:.2f}" if "vs_dense_bf16" in r else "- | -")
            print(f"| {r['case']} | {'yes' if r['ok'] else 'NO'} ({r['error']:.1e}, {r['stable']:.0%}) | "
                  f"{r['fff_us']:.1f} | {r['gbs']:.0f} | {r['tflops']:.1f} | {dense} | {r['vs_fff_torch']:.1f} |",
                  flush=True)
    if emulator:
        return [r["case"] for r in results if not r["ok"]]
    print("\nAblation: microseconds per call of each kernel alone (the default picks latency for batches "
          "up to 2048 tokens, throughput above).\n")
    print("| tree layer | default | latency | throughput | throughput, no staged rows |")
    print("|---|---:|---:|---:|---:|")
    for r in results:
        t = r["times"]
        print(f"| {r['case']} | {t['auto']:.1f} | {t['latency']:.1f} | {t['throughput']:.1f} | {t['unstaged']:.1f} |")
    dense = [r for r in results if "vs_dense_bf16" in r]
    large = [r for r in dense if r["batch"] >= 4096 and r["spec"]["dtype"] == "bf16"]
    print(f"\ntargets: >=3x dense bf16 at batch >= 4096 in bf16: "
          f"{'met' if large and all(r['vs_dense_bf16'] >= 3 for r in large) else 'NOT met'} "
          f"(min {min((r['vs_dense_bf16'] for r in large), default=float('nan')):.2f}x); "
          f">=10x torch FFF: {'met' if all(r['vs_fff_torch'] >= 10 for r in results) else 'NOT met'} "
          f"(min {min(r['vs_fff_torch'] for r in results):.1f}x); "
          f"never slower than dense at batch 1: "
          f"{'met' if all(min(r['vs_dense_bf16'], r['vs_dense_tf32']) >= 1 for r in dense if r['batch'] == 1) else 'NOT met'}")
    return [r["case"] for r in results if not r["ok"]]


#
# FFN sublayers and a whole block
#


def sublayer_inputs(spec, batch, sets):
    """A sublayer's (or the block's) weights and `sets` input/output pairs:
    the tree layers' from tree_inputs, the norms' O(1)."""
    dtype, width = DTYPES[spec["dtype"]], spec["width"]
    tree = {"op": "tree_ffn", "dtype": spec["dtype"], "width": width, "depth": spec["depth"]}
    result = tree_inputs(tree, batch, sets)
    extra = {"gamma": (1 + 0.2 * torch.randn(width, device=DEVICE)).to(dtype),
             "beta": (0.2 * torch.randn(width, device=DEVICE)).to(dtype)}
    if spec["form"] == "block":
        leaf = {"op": "leaf_tree_ffn", "dtype": spec["dtype"], "width": width, "depth": spec["leaf_depth"],
                "leaf_width": spec["leaf_width"]}
        leaf_weights = tree_inputs(leaf, 1, 1)[0]
        extra.update({k: leaf_weights[k] for k in ("node_w", "node_b", "w1", "b1", "w2", "b2")},
                     rms_gamma=(1 + 0.2 * torch.randn(width, device=DEVICE)).to(dtype))
    return [dict(s, **extra) for s in result]


def sublayer_parts(spec):
    """The pieces of a sublayer as (tree spec, leaf spec or None)."""
    tree = {"op": "tree_ffn", "dtype": spec["dtype"], "width": spec["width"], "depth": spec["depth"]}
    if spec["form"] != "block":
        return tree, None
    return tree, {"op": "leaf_tree_ffn", "dtype": spec["dtype"], "width": spec["width"],
                  "depth": spec["leaf_depth"], "leaf_width": spec["leaf_width"]}


def sublayer_reference(spec, s):
    """float64, rounding to the storage type where the unfused ops store;
    returns y and the rows whose routes are unambiguous."""
    dtype, width = DTYPES[spec["dtype"]], spec["width"]
    rnd = lambda t: t.to(dtype).double()
    tree, leaf = sublayer_parts(spec)
    x = s["x"].double()
    ln = lambda v: rnd(F.layer_norm(v, (width,), s["gamma"].double(), s["beta"].double(), 1e-5))
    if spec["form"] == "post_ln":
        t, stable = tree_reference(tree, s)
        return ln(rnd(x + rnd(t))), stable
    # The block's first norm has epsilon 1e-12 (examples/pre_ln_block.mlir).
    if spec["form"] == "block":
        ln = lambda v: rnd(F.layer_norm(v, (width,), s["gamma"].double(), s["beta"].double(), 1e-12))
    t, stable = tree_reference(tree, dict(s, x=ln(x)))
    h = rnd(x + rnd(t))
    if leaf is None:
        return h, stable
    # examples/pre_ln_block.mlir's leaves use GELU.
    rms = rnd(h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * s["rms_gamma"].double())
    t2, stable2 = tree_reference(dict(leaf, activation="gelu"), dict(s, x=rms))
    return rnd(h + rnd(t2)), stable & stable2


def torch_sublayer(spec):
    """The same math in PyTorch, its tree layers as torch_fff."""
    width = spec["width"]
    tree, leaf = sublayer_parts(spec)
    tree_step = torch_fff(tree)
    eps = 1e-12 if spec["form"] == "block" else 1e-5
    ln = lambda s, v: F.layer_norm(v, (width,), s["gamma"], s["beta"], eps)
    if spec["form"] == "post_ln":
        return lambda s: ln(s, s["x"] + tree_step(s))
    if leaf is None:
        return lambda s: s["x"] + tree_step(dict(s, x=ln(s, s["x"])))
    leaf_step = torch_fff(dict(leaf, activation="gelu"))

    def block(s):
        h = s["x"] + tree_step(dict(s, x=ln(s, s["x"])))
        return h + leaf_step(dict(s, x=F.rms_norm(h, (width,), s["rms_gamma"], 1e-6)))
    return block


def dense_sublayer(spec):
    """The pre-LN sublayer with the dense feedforward the tree replaces."""
    width, dtype = spec["width"], DTYPES[spec["dtype"]]
    ff = dense_ff(width, dtype)
    return lambda s: s["x"] + ff({f"x_{dtype}": F.layer_norm(s["x"], (width,), s["gamma"], s["beta"], 1e-5)})


compiled_sublayers = {}


def run_sublayer_case(spec, batch):
    sets = sublayer_inputs(spec, batch, sets=1 if emulator else 4)
    function = getattr(sublayer_library, spec["function"])
    fff_step = lambda s: call_fff(function, spec["args"], s)
    set_stream(None if emulator else torch.cuda.current_stream())
    s = sets[0]
    # A few rows may all have an ambiguous route somewhere along their
    # 12 + 4 levels; then the check takes fresh rows.
    for _ in range(8):
        s["y"].fill_(float("nan"))
        fff_step(s)
        synchronize()
        check_error(spec["function"], sublayer_library)
        ref, stable = sublayer_reference(spec, s)
        if stable.any():
            break
        s["x"] = torch.randn_like(s["x"], dtype=torch.float32).to(s["x"].dtype)
    error = stable_rows_error(s["y"], ref, stable)
    ok = error <= TOLERANCE[spec["dtype"]] and enough_rows_compared(stable, batch)

    eager = torch_sublayer(spec)
    # The baseline must compute the same thing, within its own roundings.
    baseline_error = stable_rows_error(eager(s), ref, stable)
    ok = ok and baseline_error <= 3 * TOLERANCE[spec["dtype"]]
    compiled = compiled_sublayers.setdefault(spec["function"], torch.compile(eager))
    fff_us = graph_time_us(fff_step, sets)
    check_error(spec["function"], sublayer_library)
    result = {"case": f"{spec['function']} B={batch}", "ok": ok, "error": error,
              "baseline_error": baseline_error, "stable": stable.float().mean().item(), "fff_us": fff_us,
              "vs_eager": graph_time_us(eager, sets) / fff_us, "vs_compile": graph_time_us(compiled, sets) / fff_us}
    if spec["form"] == "pre_ln":
        dense = compiled_sublayers.setdefault(("dense", spec["function"]), torch.compile(dense_sublayer(spec)))
        result["vs_dense"] = graph_time_us(dense, sets) / fff_us
    return result


def run_sublayers():
    batches = [1, 4096] if options.quick else options.batches
    results = []
    print("\n| sublayer | correct (rel. err, rows compared) | torch's rel. err | fff us | fff x eager | "
          "fff x compile | fff x dense sublayer, compiled |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for spec in manifest["sublayer_functions"]:
        for batch in batches:
            r = run_sublayer_case(spec, batch)
            results.append(r)
            dense = f"{r['vs_dense']:.2f}" if "vs_dense" in r else "-"
            print(f"| {r['case']} | {'yes' if r['ok'] else 'NO'} ({r['error']:.1e}, {r['stable']:.0%}) | "
                  f"{r['baseline_error']:.1e} | {r['fff_us']:.1f} | {r['vs_eager']:.2f} | {r['vs_compile']:.2f} | "
                  f"{dense} |", flush=True)
    if not emulator:
        slower = [r["case"] for r in results if r["vs_compile"] < 1.0]
        print(f"\nslower than torch.compile: {len(slower)}{': ' + ', '.join(slower) if slower else ''}")
    return [r["case"] for r in results if not r["ok"]]


def run_norms():
    rows_list = options.rows[:1] if options.quick else options.rows
    results = []
    print("| case | correct (rel. err) | fff us | GB/s | of copy | fff x eager | fff x compile |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for spec in manifest["functions"]:
        for rows in rows_list:
            r = run_case(spec, rows)
            results.append(r)
            print(f"| {r['case']} | {'yes' if r['ok'] else 'NO'} ({r['error']:.1e}) | {r['fff_us']:.1f} | "
                  f"{r['gbs']:.0f} | {r['copy_fraction']:.0%} | {r['vs_eager']:.2f} | {r['vs_compile']:.2f} |",
                  flush=True)
    wrong = [r["case"] for r in results if not r["ok"]]
    if emulator:
        print(f"\n{len(results)} cases; wrong: {len(wrong)}")
        return wrong
    geomean = math.exp(sum(math.log(r["vs_compile"]) for r in results) / len(results))
    slower = [r["case"] for r in results if r["vs_compile"] < 1.0]
    under90 = [r["case"] for r in results if r["hidden"] >= 4096 and r["copy_fraction"] < 0.9]
    print(f"\n{len(results)} cases; wrong: {len(wrong)}; geomean speedup vs torch.compile: {geomean:.2f}x; "
          f"slower than torch.compile: {len(slower)}; hidden>=4096 under 90% of copy bandwidth: {len(under90)}")
    for label, cases in (("slower than torch.compile", slower), ("under 90% of copy", under90)):
        if cases:
            print(f"{label}: {', '.join(cases)}")
    return wrong


def main():
    device = f"fff's PTX emulator ({options.emulate}), nothing timed" if emulator else torch.cuda.get_device_name()
    print(f"device: {device}, torch {torch.__version__}")
    import norm_grad_check
    import tree_grad_check
    harness = sys.modules[__name__]
    parts = {"norms": run_norms, "norm_grads": lambda: norm_grad_check.run(harness), "trees": run_trees,
             "tree_grads": lambda: tree_grad_check.run(harness), "sublayers": run_sublayers}
    wrong = []
    for name, run_part in parts.items():
        if options.only in (None, name):
            # Each part draws the same data whichever parts run before it.
            torch.manual_seed(0)
            wrong += run_part()
    if wrong:
        print(f"wrong: {', '.join(wrong)}")
    return 1 if wrong else 0


sys.exit(main())
