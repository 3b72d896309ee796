"""fff.compile(target="cpu"): each op called with numpy arrays and torch
tensors, against float64 references; the checks on the way in."""

import gc

import numpy as np
import pytest

import fff
from conftest import (TOLERANCE, dequantize, layer_norm, leaf_tree_ffn, quantize, relative_error,
                      rms_norm, tree_ffn)

DTYPES = ["f32", "f16", "bf16"]


def norms_module(dtype, hidden="?"):
    x, p, s = f"tensor<?x{hidden}x{dtype}>", f"tensor<{hidden}x{dtype}>", "tensor<?x1xf32>"
    return f"""
func.func @layer_norm(%x: {x}, %g: {p}, %b: {p}) -> ({x}, {s}, {s}) {{
  %y, %m, %r = fff.layer_norm %x scale(%g : {p}) bias(%b : {p}) return_stats : {x}
  return %y, %m, %r : {x}, {s}, {s}
}}
func.func @rms_norm(%x: {x}, %g: {p}) -> {x} {{
  %y = fff.rms_norm %x scale(%g : {p}) : {x}
  return %y : {x}
}}
"""


def layer_norm_inputs(dtype, rng):
    """x (5x96), g and b in `dtype`: [(storage array, float64 values)]."""
    return [quantize(rng.standard_normal((5, 96)) * 3 + 1, dtype),
            quantize(rng.standard_normal(96), dtype), quantize(rng.standard_normal(96), dtype)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_norms_on_numpy(dtype, rng):
    exe = fff.compile(norms_module(dtype))
    (x_arr, x), (g_arr, g), (b_arr, b) = layer_norm_inputs(dtype, rng)
    y, mean, rstd = exe.layer_norm(x_arr, g_arr, b_arr)
    ref_y, ref_mean, ref_rstd = layer_norm(x, g, b)
    assert y.dtype == x_arr.dtype and y.shape == (5, 96) and mean.shape == (5, 1)
    assert relative_error(dequantize(y, dtype), ref_y) < TOLERANCE[dtype]
    assert relative_error(mean, ref_mean) < TOLERANCE["f32"]
    assert relative_error(rstd, ref_rstd) < TOLERANCE["f32"]
    assert relative_error(dequantize(exe.rms_norm(x_arr, g_arr), dtype), rms_norm(x, g)) < TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
def test_norms_on_torch(dtype, rng):
    torch = pytest.importorskip("torch")
    torch_dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    exe = fff.compile(norms_module(dtype, 64))
    x = torch.from_numpy(rng.standard_normal((7, 64)).astype(np.float32)).to(torch_dtype)
    g = torch.from_numpy(rng.standard_normal(64).astype(np.float32)).to(torch_dtype)
    y = exe.rms_norm(x, g)
    assert isinstance(y, torch.Tensor) and y.dtype == torch_dtype
    assert relative_error(y.double().numpy(), rms_norm(x.double().numpy(), g.double().numpy())) < TOLERANCE[dtype]


def test_tree_ffn(rng):
    depth, din, dout = 3, 40, 24
    nodes = 2 ** (depth + 1) - 1
    exe = fff.compile(f"""
func.func @tree(%x: tensor<?x{din}xf32>, %wi: tensor<2x{nodes}x{din}xf32>, %bi: tensor<2x{nodes}xf32>,
                %wo: tensor<2x{nodes}x{dout}xf32>, %bo: tensor<{dout}xf32>) -> tensor<?x{dout}xf32> {{
  %y = fff.tree_ffn %x, %wi bias(%bi : tensor<2x{nodes}xf32>), %wo bias(%bo : tensor<{dout}xf32>) {{depth = {depth} : i64}}
      : tensor<?x{din}xf32>, tensor<2x{nodes}x{din}xf32>, tensor<2x{nodes}x{dout}xf32>
  return %y : tensor<?x{dout}xf32>
}}""")
    args = [rng.standard_normal(s).astype(np.float32) for s in
            [(9, din), (2, nodes, din), (2, nodes), (2, nodes, dout), (dout,)]]
    assert relative_error(exe.tree(*args), tree_ffn(*[a.astype(np.float64) for a in args], depth)) < TOLERANCE["f32"]


def test_leaf_tree_ffn(rng):
    depth, din, width, dout = 2, 16, 8, 12
    leaves = 2 ** depth
    types = [f"tensor<?x{din}xf32>", f"tensor<{leaves - 1}x{din}xf32>", f"tensor<{leaves - 1}xf32>",
             f"tensor<{leaves}x{din}x{width}xf32>", f"tensor<{leaves}x{width}xf32>",
             f"tensor<{leaves}x{width}x{dout}xf32>", f"tensor<{leaves}x{dout}xf32>"]
    names = ["x", "nw", "nb", "w1", "b1", "w2", "b2"]
    exe = fff.compile(f"""
func.func @leaf({', '.join(f'%{n}: {t}' for n, t in zip(names, types))}) -> tensor<?x{dout}xf32> {{
  %y = fff.leaf_tree_ffn {', '.join('%' + n for n in names)} {{depth = {depth} : i64}} : {', '.join(types)}
  return %y : tensor<?x{dout}xf32>
}}""")
    shapes = [(6, din), (leaves - 1, din), (leaves - 1,), (leaves, din, width), (leaves, width),
              (leaves, width, dout), (leaves, dout)]
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    assert relative_error(exe.leaf(*args), leaf_tree_ffn(*[a.astype(np.float64) for a in args], depth)) \
        < TOLERANCE["f32"]


def test_linalg_input_is_raised_and_run(rng):
    """A decomposed RMSNorm, as frontends emit it, through the same call."""
    exe = fff.compile("""
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @rms(%x: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x32xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %ss = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x32xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %q = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %q : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %ey = tensor.empty(%n) : tensor<?x32xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss : tensor<?x32xf32>, tensor<?xf32>) outs(%ey : tensor<?x32xf32>) {
  ^bb0(%v: f32, %s: f32, %out: f32):
    %cnt = arith.constant 32.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.divf %s, %cnt : f32
    %a = arith.addf %m, %eps : f32
    %r = math.rsqrt %a : f32
    %o = arith.mulf %v, %r : f32
    linalg.yield %o : f32
  } -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}""")
    x = rng.standard_normal((4, 32)).astype(np.float32)
    assert relative_error(exe.rms(x), rms_norm(x.astype(np.float64), 1.0)) < TOLERANCE["f32"]


RESIDUAL_LAYER_NORM = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @residual_layer_norm(%x: tensor<?x64xf32>, %a: tensor<?x64xf32>, %g: tensor<64xf32>,
                               %b: tensor<64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %a : tensor<?x64xf32>, tensor<?x64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<?x64xf32>
  %y = fff.layer_norm %h scale(%g : tensor<64xf32>) bias(%b : tensor<64xf32>) : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}"""


def test_a_fused_unit(rng):
    # The residual add joins the norm in one fff.fusion unit. Its terminator,
    # fff.yield, must be known as one by the MLIR library the package loads:
    # a TypeID that the bundled C API kept to itself once made it not.
    assert "fff.fusion" in fff.lower(RESIDUAL_LAYER_NORM, "builtin.module(fff-fuse-norms)")
    exe = fff.compile(RESIDUAL_LAYER_NORM)
    x, a = (rng.standard_normal((5, 64)).astype(np.float32) for _ in range(2))
    g, b = (rng.standard_normal(64).astype(np.float32) for _ in range(2))
    expected = layer_norm(x.astype(np.float64) + a, g, b)[0]
    assert relative_error(exe.residual_layer_norm(x, a, g, b), expected) < TOLERANCE["f32"]


def test_inputs_are_not_copied_and_results_outlive_the_call(rng):
    exe = fff.compile(norms_module("f32", 16))
    x = rng.standard_normal((3, 16)).astype(np.float32)
    g = np.ones(16, np.float32)
    results = [exe.rms_norm(x, g) for _ in range(3)]
    gc.collect()
    for y in results:
        assert relative_error(y, rms_norm(x.astype(np.float64), 1.0)) < TOLERANCE["f32"]
    # A strided view is copied into a contiguous buffer on the way in.
    wide = rng.standard_normal((3, 32)).astype(np.float32)
    view = wide[:, ::2]
    assert relative_error(exe.rms_norm(view, g), rms_norm(view.astype(np.float64), 1.0)) < TOLERANCE["f32"]


def test_results_reuse_freed_buffers_and_never_live_ones(rng):
    # 300 x 1024 f32 results (1.2 MB) come from the host buffer cache: a
    # result still referenced is never handed out again; one dropped is, to
    # the next call of its size, which then writes all of it.
    exe = fff.compile(norms_module("f32", 1024))
    g = rng.standard_normal(1024).astype(np.float32)
    xs = [rng.standard_normal((300, 1024)).astype(np.float32) * (i + 1) for i in range(3)]
    first = exe.rms_norm(xs[0], g)
    second = exe.rms_norm(xs[1], g)
    assert first.ctypes.data != second.ctypes.data
    address = first.ctypes.data
    del first
    gc.collect()
    third = exe.rms_norm(xs[2], g)
    assert third.ctypes.data == address
    for x, y in ((xs[1], second), (xs[2], third)):
        assert relative_error(y, rms_norm(x.astype(np.float64), g)) < TOLERANCE["f32"]


def test_the_buffer_cache_can_be_limited_or_left_out(rng):
    x = rng.standard_normal((300, 1024)).astype(np.float32)
    g = rng.standard_normal(1024).astype(np.float32)
    expected = rms_norm(x.astype(np.float64), g)
    previous = fff.set_buffer_cache_limit(0)
    try:
        assert fff.set_buffer_cache_limit(0) == 0
        for options in ({}, {"buffer_cache": False}):
            exe = fff.compile(norms_module("f32", 1024), **options)
            for _ in range(2):
                assert relative_error(exe.rms_norm(x, g), expected) < TOLERANCE["f32"]
    finally:
        fff.set_buffer_cache_limit(previous)


def test_inputs_are_never_written(rng):
    # Elementwise work on tensors becomes a linalg op whose destination is an
    # input; bufferized in place, it overwrote the caller's array.
    exe = fff.compile("""
func.func @residual(%x: tensor<?x8xf32>, %a: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %h = arith.addf %x, %a : tensor<?x8xf32>
  %y = math.tanh %h : tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}""")
    x = rng.standard_normal((3, 8)).astype(np.float32)
    a = rng.standard_normal((3, 8)).astype(np.float32)
    x_before, a_before = x.copy(), a.copy()
    y = exe.residual(x, a)
    assert np.array_equal(x, x_before) and np.array_equal(a, a_before)
    assert relative_error(y, np.tanh(x.astype(np.float64) + a)) < TOLERANCE["f32"]


def test_threads_give_the_same_bits(rng):
    # 1100 x 1024 elements: enough for the rows to be split across threads.
    x = rng.standard_normal((1100, 1024)).astype(np.float32)
    g = rng.standard_normal(1024).astype(np.float32)
    b = rng.standard_normal(1024).astype(np.float32)
    results = [fff.compile(norms_module("f32", 1024), threads=n).layer_norm(x, g, b) for n in (1, 2, 0)]
    for other in results[1:]:
        assert all(np.array_equal(a, c) for a, c in zip(results[0], other))
    assert relative_error(results[0][0], layer_norm(x.astype(np.float64), g, b)[0]) < TOLERANCE["f32"]


def test_aligned_copies_only_what_is_off_a_cache_line(rng):
    storage = np.empty(64 * 40 + 64, np.float32)
    start = (-storage.ctypes.data % 64) // 4
    on_line = storage[start:start + 64 * 40].reshape(64, 40)
    on_line[...] = rng.standard_normal((64, 40))
    assert fff.aligned(on_line) is on_line
    off_line = storage[start + 4:start + 4 + 63 * 40].reshape(63, 40)  # 16 bytes past
    copy = fff.aligned(off_line)
    assert copy.ctypes.data % 64 == 0 and copy.flags.c_contiguous and np.array_equal(copy, off_line)
    strided = fff.aligned(on_line[:, ::2])
    assert strided.ctypes.data % 64 == 0 and np.array_equal(strided, on_line[:, ::2])
    bits = fff.aligned(np.arange(7, dtype=np.uint16))  # bf16 as raw bits keeps its dtype
    assert bits.dtype == np.uint16 and bits.ctypes.data % 64 == 0 and list(bits) == list(range(7))
    # The same bits from either buffer: rows of 40 f32 on a line and off it.
    exe = fff.compile(norms_module("f32", 40))
    g, b = rng.standard_normal(40).astype(np.float32), rng.standard_normal(40).astype(np.float32)
    off = exe.layer_norm(off_line, g, b)
    on = exe.layer_norm(fff.aligned(off_line), g, b)
    assert all(np.array_equal(a, c) for a, c in zip(off, on))


def test_common_calls_are_made_natively_and_the_rest_converted(rng):
    # HostCall takes arrays compiled code can read as they are; for anything
    # else it calls nothing and returns None, and the Python side converts
    # (or refuses) the arguments.
    torch = pytest.importorskip("torch")
    exe = fff.compile(norms_module("f32", 16))
    x = rng.standard_normal((3, 16)).astype(np.float32)
    g = rng.standard_normal(16).astype(np.float32)
    expected = exe.rms_norm._call_cpu_converting((x, g))
    read_only = x.copy()
    read_only.flags.writeable = False
    storage = bytearray(x.nbytes + 1)
    misaligned = np.frombuffer(memoryview(storage)[1:], np.float32).reshape(3, 16)
    misaligned[...] = x

    class Subclass(torch.Tensor):
        pass

    as_is = [(x, g), (read_only, g), (torch.from_numpy(x), torch.from_numpy(g)),
             (torch.from_numpy(x).requires_grad_(), torch.from_numpy(g)),
             (torch.from_numpy(x), torch.nn.Parameter(torch.from_numpy(g))),
             (x[:, None, :][:, 0], g)]  # a unit extent's stride does not matter
    converted = [(np.asfortranarray(np.repeat(x, 2, 0))[::2], g), (misaligned, g),
                 (torch.from_numpy(np.ascontiguousarray(x.T)).t(), torch.from_numpy(g)),
                 (torch.from_numpy(x).as_subclass(Subclass), torch.from_numpy(g)),
                 # A negative view: its buffer holds -x.
                 (torch._neg_view(torch.from_numpy(-x)), torch.from_numpy(g))]
    for args in as_is:
        y = exe.rms_norm._host_call(*args)
        assert y is not None and np.array_equal(np.asarray(y.detach() if hasattr(y, "detach") else y), expected)
    for args in converted:
        assert exe.rms_norm._host_call(*args) is None
        y = exe.rms_norm(*args)
        assert np.array_equal(np.asarray(y), expected)
    refused = [(x.tolist(), g), (x.astype(np.float64), g), (np.ones((3, 17), np.float32), g), (x,)]
    for args in refused:
        assert exe.rms_norm._host_call(*args) is None
        with pytest.raises(fff.FFFError):
            exe.rms_norm(*args)


@pytest.mark.parametrize("dtype", DTYPES)
def test_native_and_converting_calls_give_the_same_results(dtype, rng):
    exe = fff.compile(norms_module(dtype))
    x, g, b = (array for array, _ in layer_norm_inputs(dtype, rng))
    args = [(x, g, b)]
    torch = pytest.importorskip("torch")
    as_torch = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    args.append(tuple(torch.from_numpy(a).view(as_torch) for a in (x, g, b)))
    for call in args:
        native = exe.layer_norm(*call)
        converted = exe.layer_norm._call_cpu_converting(call)
        for a, c in zip(native, converted):
            assert type(a) is type(c) and a.dtype == c.dtype and a.shape == c.shape
            assert (a == c).all() if isinstance(a, np.ndarray) else torch.equal(a, c)


def test_torch_results_own_their_buffers(rng):
    # Results come back as tensors over the buffers compiled code allocated
    # (no copy); each buffer returns to fff's cache when its last tensor
    # dies, on whichever thread drops it.
    import threading
    torch = pytest.importorskip("torch")
    exe = fff.compile(norms_module("f32", 768))
    x = torch.from_numpy(rng.standard_normal((64, 768)).astype(np.float32))
    g, b = (torch.from_numpy(rng.standard_normal(768).astype(np.float32)) for _ in range(2))
    expected = exe.layer_norm._call_cpu_converting((x, g, b))
    kept = []
    for i in range(20):
        results = exe.layer_norm(x, g, b)
        assert all(type(r) is torch.Tensor and not r.requires_grad for r in results)
        assert all(torch.equal(r, e) for r, e in zip(results, expected))
        if i % 2:
            kept.append(results)  # alive while later calls allocate
    assert all(torch.equal(r, e) for results in kept for r, e in zip(results, expected))
    dropped = threading.Thread(target=kept.clear)
    dropped.start()
    dropped.join()
    assert all(torch.equal(r, e) for r, e in zip(exe.layer_norm(x, g, b), expected))


def test_calls_from_several_threads_at_once(rng):
    # Native calls release the GIL: four threads call one function at once,
    # each with its own inputs, large enough to split across threads too.
    import threading
    exe = fff.compile(norms_module("f32", 768))
    g = rng.standard_normal(768).astype(np.float32)
    xs = [rng.standard_normal((300, 768)).astype(np.float32) * (i + 1) for i in range(4)]
    expected = [exe.rms_norm(x, g) for x in xs]
    mismatches = []

    def call(i):
        for _ in range(50):
            if not np.array_equal(exe.rms_norm(xs[i], g), expected[i]):
                mismatches.append(i)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not mismatches
    assert relative_error(expected[3], rms_norm(xs[3].astype(np.float64), g)) < TOLERANCE["f32"]


def test_a_result_that_is_an_argument_is_a_copy(rng):
    # The caller's memory is theirs: a result viewing an argument is copied.
    exe = fff.compile("""
func.func @both(%x: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  return %x, %x : tensor<?x8xf32>, tensor<?x8xf32>
}""")
    x = rng.standard_normal((2, 8)).astype(np.float32)
    first, second = exe.both(x)
    before = x.copy()
    x += 1
    assert np.array_equal(first, before) and np.array_equal(second, before)
    first += 1
    assert np.array_equal(second, before)


def test_empty_batch():
    exe = fff.compile(norms_module("f32", 16))
    y = exe.rms_norm(np.zeros((0, 16), np.float32), np.ones(16, np.float32))
    assert y.shape == (0, 16)


@pytest.mark.parametrize("args, message", [
    (lambda: (np.ones((2, 16), np.float64), np.ones(16, np.float32)),
     "@rms_norm argument #0 has dtype float64 but the function takes f32: numpy dtype float32"),
    (lambda: (np.ones((2, 17), np.float32), np.ones(16, np.float32)),
     "@rms_norm argument #0 has shape [2, 17] but the function takes [?, 16]"),
    (lambda: (np.ones(16, np.float32), np.ones(16, np.float32)),
     "@rms_norm argument #0 has shape [16] but the function takes [?, 16]"),
    (lambda: (np.ones((2, 16), np.float32),), "@rms_norm takes 2 arguments, got 1"),
])
def test_bad_arguments(args, message):
    exe = fff.compile(norms_module("f32", 16))
    with pytest.raises(fff.FFFError) as error:
        exe.rms_norm(*args())
    assert str(error.value) == message


@pytest.mark.parametrize("layout", ["sparse_coo", "sparse_csr", "mkldnn"])
def test_tensors_without_a_dense_buffer_are_one_line_errors(layout):
    torch = pytest.importorskip("torch")
    exe = fff.compile(norms_module("f32", 16))
    dense = torch.randn(2, 16)
    x = {"sparse_coo": dense.to_sparse, "sparse_csr": dense.to_sparse_csr, "mkldnn": dense.to_mkldnn}[layout]()
    with pytest.raises(fff.FFFError) as error:
        exe.rms_norm(x, torch.ones(16))
    assert str(error.value) == (f"@rms_norm argument #0 is a {x.layout} tensor; fff takes dense (torch.strided) "
                                "tensors: convert it with .to_dense()")


def test_extents_that_contradict_each_other_are_checked_by_the_compiled_code():
    exe = fff.compile(norms_module("bf16"))
    x, g = np.zeros((2, 8), np.uint16), np.zeros(3, np.uint16)
    with pytest.raises(fff.FFFError, match=r"'fff.rms_norm' op scale dim 0 \(D\) does not match input dim 1"):
        exe.rms_norm(x, g)
    # The next call is unaffected.
    assert exe.rms_norm(x, np.zeros(8, np.uint16)).shape == (2, 8)


def test_functions_and_errors_of_compile():
    exe = fff.compile(norms_module("f32", 16))
    assert sorted(exe.functions) == ["layer_norm", "rms_norm"]
    assert "rms_norm" in dir(exe)
    with pytest.raises(AttributeError, match="no public function 'nope'"):
        exe.nope
    with pytest.raises(fff.FFFError, match="unknown target 'tpu'"):
        fff.compile(norms_module("f32", 16), target="tpu")
    with pytest.raises(fff.FFFError, match="^bad option for fff-cpu-pipeline: no such option bogus$"):
        fff.compile(norms_module("f32", 16), bogus=3)
    with pytest.raises(fff.FFFError, match="^bad option value for fff-cpu-pipeline in 'threads=many"):
        fff.compile(norms_module("f32", 16), threads="many")
    with pytest.raises(fff.FFFError, match="@f argument #0 has element type i4, which fff's "
                                           "Python functions do not pass"):
        fff.compile("func.func @f(%x: tensor<4xi4>) -> tensor<4xi4> { return %x : tensor<4xi4> }")
