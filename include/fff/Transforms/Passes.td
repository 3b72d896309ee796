//===- Passes.td - fff passes over any dialect -------------*- tablegen -*-===//
//
// Passes that keep the promises of fff's pipelines about compiled modules,
// whatever dialects the module holds: entry points that check the buffers
// they are given, run-time checks that report instead of abort, and output
// that is fully lowered.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_TRANSFORMS_PASSES_TD
#define FFF_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def CheckInput : Pass<"fff-check-input", "::mlir::ModuleOp"> {
  let summary = "Reject IR that verifies but that upstream passes mishandle";
  let description = [{
    The first pass of both pipelines. Some IR passes MLIR's verifiers but
    crashes upstream passes the pipelines run (canonicalization,
    `expand-strided-metadata`); a user's input must get an error instead.
    This pass reports the first such op, with a one-line message:

    - `tensor.dim` / `memref.dim` with a constant index outside the rank;
    - a reshape (`expand_shape`, `collapse_shape`) whose reassociation
      names a dim outside the rank (indices past 2^32 wrap in the
      verifier's affine maps);
    - an `expand_shape` whose `output_shape` gives a static extent for a
      dim its result type leaves dynamic, or the other way round;
    - a type, in any position (a value, a block argument, a function's
      signature, a tensor's, memref's or vector's elements), that no
      pipeline lowers: complex numbers, floats other than f16, bf16, f32
      and f64 (f8, f6, f4, tf32, f80, f128), and, in a function's
      signature, memrefs of `index`;
    - a tensor, memref or vector whose static extents hold more than 2^48
      bytes. Every size the pipelines derive from static extents
      (strategies, launch sizes, shared-memory budgets, buffer sizes) is
      such a size times constants under 2^14, so none overflows.

    New cases join as fff's fuzzer (`scripts/fff-fuzz.py`) finds them.
  }];
}

def CheckEntryBuffers : Pass<"fff-check-entry-buffers", "::mlir::ModuleOp"> {
  let summary = "Check the buffers a public function is called with";
  let description = [{
    A public function's memref arguments come from its caller (fff-run, an
    AOT library's user, Python), who may pass any descriptor: sizes that
    contradict the static ones, negative sizes, strided or offset views,
    misaligned pointers. The code inside assumes what the argument types
    say, so each of these would be a wrong answer or an out-of-bounds
    access. This pass checks them when the function is entered:

    - every static dim has its declared extent, and no dim is negative;
    - the buffer is contiguous in row-major order (strides of unit dims
      and of empty buffers are not looked at, as torch's `is_contiguous`
      does not);
    - the aligned pointer plus the offset is a multiple of `alignment`
      bytes (the GPU pipeline asks 16, for its 128-bit accesses);
    - a non-empty buffer has a non-null pointer.

    Each rule is a `cf.assert` with a one-line message naming the function,
    the argument and the rule. To read the descriptor as given, the
    argument's type becomes fully dynamic (same ABI) and is cast back to
    the declared type for the body.

    A function that returns buffers it allocates is also given a check that
    each returned allocation has the extents it was allocated with. This is
    trivially true until `buffer-results-to-out-params` turns the
    allocation into a caller-provided buffer: then it checks the caller's
    buffer. The GPU pipeline runs this pass before that one, and again
    after it for the new arguments; arguments already checked (their
    layout fully dynamic) are left alone.
  }];
  let options = [
    Option<"alignment", "alignment", "unsigned", /*default=*/"0",
           "Required byte alignment of every buffer (0: the element size)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::memref::MemRefDialect",
  ];
}

def CheckAllocations : Pass<"fff-check-allocations"> {
  let summary = "Check that host heap allocations succeeded";
  let description = [{
    `memref.alloc` becomes a `malloc` call, and `gpu.alloc` a call of the
    CUDA runtime, whose null result for a size too large to allocate would
    be written through. This pass adds a `cf.assert` after each
    `memref.alloc` and `gpu.alloc` outside GPU kernels that its pointer is
    not null, unless the buffer is empty.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::memref::MemRefDialect",
  ];
}

def LowerRuntimeChecks : Pass<"fff-lower-runtime-checks", "::mlir::ModuleOp"> {
  let summary = "Turn cf.assert into an error report and an early return";
  let description = [{
    MLIR lowers a failed `cf.assert` to `abort()`, which kills the process
    that embeds the compiled code (a Python interpreter, say) with a crash
    report. fff's pipelines lower it instead to a call of
    `fffReportCheckFailure(message)`, which fff's runtimes implement by
    recording the message for `fffGetLastError()`, and a return from the
    function with poison results, which the caller must not read once an
    error is reported.

    Every `cf.assert` in a function's own body (after `convert-scf-to-cf`)
    is lowered this way; one inside another region (an unconverted loop,
    say) is an error.
  }];
  let dependentDialects = [
    "::mlir::cf::ControlFlowDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::ub::UBDialect",
  ];
}

def VerifyLowered : Pass<"fff-verify-lowered", "::mlir::ModuleOp"> {
  let summary = "Fail unless the module is fully lowered to LLVM dialect";
  let description = [{
    The last pass of both pipelines. A pipeline either lowers a module
    completely or fails: this pass fails, with one error naming the first
    op that is left, unless every op is in the LLVM dialect or is the
    `builtin.module`. The GPU pipeline also leaves compiled kernels
    (`gpu.binary`) and their launches (`gpu.launch_func` on LLVM values),
    which the translation to LLVM IR lowers.
  }];
  let options = [
    Option<"allowGPULaunches", "allow-gpu-launches", "bool",
           /*default=*/"false",
           "Accept gpu.binary and gpu.launch_func on LLVM-typed operands">,
    Option<"pipelineName", "pipeline", "std::string", /*default=*/"\"\"",
           "The pipeline to name in the error">,
  ];
}

def ReadOnlyArguments : Pass<"fff-read-only-arguments", "::mlir::ModuleOp"> {
  let summary = "Keep bufferization from writing into callers' tensors";
  let description = [{
    With function boundaries bufferized, one-shot bufferization treats a
    public function's tensor arguments as writable, and may compute a
    result in place in an argument's buffer: an elementwise `x + a`
    written into x's buffer overwrites the caller's array (a numpy array
    passed to a function compiled by `fff.compile`, say). This pass marks
    every tensor argument of a public function `bufferization.writable =
    false` unless the IR already says otherwise, so that results get
    buffers of their own.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect"];
}

def FreshResultBuffers : Pass<"fff-fresh-result-buffers", "::mlir::ModuleOp"> {
  let summary = "Give every buffer a function returns an allocation of its own";
  let description = [{
    A function may return one value twice (`return %h, %h`) or an argument
    as it is; upstream bufferization takes neither everywhere:

    - on tensors, one-shot bufferization refuses a value returned twice:
      its second return becomes a copy (`bufferization.alloc_tensor
      copy(%h)`);
    - on buffers, `buffer-results-to-out-params` turns each returned buffer
      into a caller's out-parameter by taking over its allocation, and
      crashes on a buffer without one of its own: a second return of a
      buffer, or an argument, is returned as a copy in a fresh buffer
      (identity layouts, as fff's pipelines make them).

    The copies become kernels (or loops) like any other work. The pipelines
    run this pass before bufferization and, on the GPU, again before the
    out-parameters.
  }];
  let dependentDialects = [
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::memref::MemRefDialect",
  ];
}

def DeviceBuffers : Pass<"fff-device-buffers", "::mlir::ModuleOp"> {
  let summary = "Place host code's buffers in GPU memory";
  let description = [{
    In the GPU pipeline, after every computation has become a kernel
    launch, host code only allocates, frees and passes buffers. This pass
    makes them device buffers:

    - `memref.alloc` outside kernels becomes `gpu.alloc`, freed by a
      `gpu.dealloc` after the last op that uses the buffer or a view of it
      (after out-params, nothing else keeps a buffer alive: a buffer that
      escapes is not freed); fff's CUDA runtime orders both on the stream
      the kernels run on. `memref.dealloc` becomes `gpu.dealloc`;
    - a `memref.get_global` of a constant (weights baked into the IR)
      stays, and its global is listed in the module attribute
      `fff.device_constants`, for `fff-upload-device-constants` to give
      host code a device copy of it after the lowering to LLVM, and a check
      follows it that the copy was made.

    A buffer that only holds the shape a `memref.reshape` reads, written by
    host stores (torch-mlir's views with computed sizes), is host metadata:
    it stays on the host, freed after its last use. Any other host code that
    reads or writes a buffer's elements (`memref.load`, `memref.store`,
    vector transfers, a `memref.copy` left over) would touch device memory
    from the CPU: each is an error naming the op, as is a stack buffer or a
    mutable global.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::memref::MemRefDialect",
  ];
}

def DedupeKernels : Pass<"fff-dedupe-kernels", "::mlir::ModuleOp"> {
  let summary = "Keep one kernel per distinct piece of work";
  let description = [{
    The kernel lowerings emit one kernel per op they lower, and a model
    repeats its layers: 24 identical transformer layers gave 72 kernels of
    which 3 differ. This pass keeps, in each `gpu.module`, the first of
    every set of identical kernels, points every launch of the others at it
    and erases them, so that code generation, the PTX and the driver's load
    grow with the distinct kernels rather than with the layers.

    Identical means the same attributes (type, `fff.strategy`, launch
    bounds) and the same body, op for op, locations aside: the same op,
    shapes, element types, attributes, strategy and fused prologue and
    epilogue. Kernels are keyed by a hash of those and compared
    structurally, never by name. Names stay as the lowerings chose them.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def UploadDeviceConstants
    : Pass<"fff-upload-device-constants", "::mlir::ModuleOp"> {
  let summary = "Give host code a device copy of each constant global";
  let description = [{
    After the lowering to LLVM, each host-code `llvm.mlir.addressof` of a
    global that `fff-device-buffers` listed in `fff.device_constants`
    becomes a call of `fffDeviceConstant(slot, address, bytes)` from fff's
    CUDA runtime, which copies the constant to the device on first use and
    returns the device copy's address, kept in the new global `slot` for
    every later call. The attribute is removed.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def LegalizeKernelMath : Pass<"fff-legalize-kernel-math", "::mlir::ModuleOp"> {
  let summary = "Rewrite math in GPU kernels into what NVPTX compiles alone";
  let description = [{
    The NVVM lowering turns most `math` ops into calls of CUDA's libdevice,
    which links only where the CUDA toolkit is found when the pipeline
    runs. In every `gpu.module`, this pass instead:

    - computes f16 and bf16 math in f32 (`math-extend-to-supported-types`);
    - expands ops defined by others (`powf`, `fpowi`, `sinh`, ...);
    - replaces transcendental functions (`exp`, `log`, `tanh`, `erf`, ...)
      by MLIR's f32 polynomial approximations;
    - lowers `sqrt` and `rsqrt` to the correctly rounded `sqrt.rn`
      instruction, and `absf`, `fma`, `floor`, `ceil`, `trunc`,
      `copysign`, `fmin`, `fmax` to LLVM intrinsics NVPTX implements.

    A math op left after that is an error naming the op and its kernel.
    So is, first, a vector of more than 64 elements anywhere in a kernel (a
    value, an argument, a memref's elements): math on it would unroll
    without end, and NVPTX aborts on one of 65536.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::vector::VectorDialect",
  ];
}

def Bf16ArithInF32 : Pass<"fff-bf16-arith-in-f32"> {
  let summary = "bf16 arithmetic as f32 arithmetic rounded after every op";
  let description = [{
    Every `arith` op on bf16 (or vectors of it) becomes the same op on f32,
    its operands extended and its result rounded to bf16 (to nearest even):
    the value IEEE arithmetic on bf16 gives, and what LLVM's x86 backend
    would compute, but without its `__truncsfbf2` libcall, which a JIT
    cannot always resolve. The roundings stay: unlike upstream's
    `arith-emulate-unsupported-floats`, whose casts it reuses, the casts
    are not marked `contract`, which would let later folds drop an extf of
    a truncf and with it the rounding after an op.

    Example:

    ```mlir
    %s = arith.addf %a, %b : vector<8xbf16>
    // becomes
    %wa = arith.extf %a : vector<8xbf16> to vector<8xf32>
    %wb = arith.extf %b : vector<8xbf16> to vector<8xf32>
    %ws = arith.addf %wa, %wb : vector<8xf32>
    %s = arith.truncf %ws : vector<8xf32> to vector<8xbf16>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def HalfVectorsAsIntegers
    : Pass<"fff-half-vectors-as-integers", "::mlir::ModuleOp"> {
  let summary = "Loads and stores of f16/bf16 vectors as i16 ones";
  let description = [{
    x86 backends without AVX512-FP16 or AVX512-BF16 handle vectors of f16
    and bf16 badly in memory operations:

    - a row's tail is a masked load or store (`llvm.intr.masked.load`,
      `llvm.intr.masked.store`), which they cannot select: `llc` aborts
      ("Do not know how to promote this operator's operand") and the JIT
      asks for `__truncsfbf2`, which it may not find;
    - a stored bf16 vector is a rounding's result, whose NaN select LLVM's
      combines move past the bitcast to bf16 (`select` of `<8 x bfloat>`),
      which AVX2 code generation scalarizes: per lane a compare, a
      conditional move and a 16-bit store. A bf16 RMSNorm of 4096x768 took
      2.9 ms so on one AVX2 core.

    This pass moves the same bits as `i16` elements, bitcasting the loaded
    vector (and a masked load's pass-through) to the float type and the
    stored one from it; nothing else changes.

    Example:

    ```mlir
    %v = llvm.intr.masked.load %p, %m, %zero {alignment = 2 : i32}
        : (!llvm.ptr, vector<8xi1>, vector<8xbf16>) -> vector<8xbf16>
    // becomes
    %zi = llvm.bitcast %zero : vector<8xbf16> to vector<8xi16>
    %vi = llvm.intr.masked.load %p, %m, %zi {alignment = 2 : i32}
        : (!llvm.ptr, vector<8xi1>, vector<8xi16>) -> vector<8xi16>
    %v = llvm.bitcast %vi : vector<8xi16> to vector<8xbf16>
    ```
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def HugePageAllocations
    : Pass<"fff-huge-page-allocations", "::mlir::ModuleOp"> {
  let summary = "Back large host buffers with transparent huge pages";
  let description = [{
    A fresh buffer costs a page fault, and the kernel zeroing a page, on
    first touch of each 4 KiB page: on this project's machine writing a
    fresh 64 MB result took 25 ms where writing an existing one took 5.5.
    A LayerNorm of 4096x4096 f32 spent more than half its time there.

    This pass defines, in the module, the allocation functions that
    `finalize-memref-to-llvm{use-generic-functions}` calls
    (`_mlir_memref_to_llvm_alloc`, `_mlir_memref_to_llvm_aligned_alloc`,
    `_mlir_memref_to_llvm_free`), with internal linkage, never inlined, and
    results marked `noalias`, so that LLVM still sees each as an allocation:

    - a buffer of `min-bytes` or more is `aligned_alloc`ed on a 2 MiB
      boundary, its size rounded up to whole 2 MiB pages, and `madvise`d
      `MADV_HUGEPAGE`, so that the kernel backs it with huge pages where
      transparent huge pages are enabled (`always` or `madvise`): one fault
      per 2 MiB;
    - smaller ones are `malloc`ed (or `aligned_alloc`ed) as before.

    The default, 32 MiB, is where glibc's malloc stops reusing freed
    memory: below it (its largest dynamic mmap threshold), a buffer freed
    and allocated again comes back from the heap, already faulted in, which
    measured faster here than fresh huge pages; from it on, every
    allocation is a fresh mapping, and huge pages cut its cost 4 to 8
    times (64 MiB allocated and written: 41 ms, 6 ms on huge pages).
    All are released with `free`, as the callers of compiled code already
    release results.

    `madvise` only advises: where huge pages are off, it fails and the
    buffer is an ordinary one.

    `--fff-cpu-pipeline` runs it when its `huge-pages` option is set. It is
    off by default because of what this project's machine measured: a VM
    whose balloon hands freed memory back to the host, so that a fresh huge
    page may cost the host's faults as well. A LayerNorm of 4096x4096 f32
    took 10 to 13 ms on huge pages at some times and 23 to 27 ms at others,
    against 20 to 21 ms on ordinary pages.
  }];
  let options = [
    Option<"minBytes", "min-bytes", "int64_t", /*default=*/"32 << 20",
           "The smallest allocation, in bytes, backed by huge pages">,
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def RuntimeAllocations
    : Pass<"fff-runtime-allocations", "::mlir::ModuleOp"> {
  let summary = "Allocate host buffers from the runtime's buffer cache";
  let description = [{
    Declares the allocation functions that
    `finalize-memref-to-llvm{use-generic-functions}` calls
    (`_mlir_memref_to_llvm_alloc`, `_mlir_memref_to_llvm_aligned_alloc`,
    `_mlir_memref_to_llvm_free`) for the host to define, with the
    allocating ones' results marked `noalias`. LLVM knows that of `malloc`
    but not of a function it cannot see, and without it reloads and
    re-checks around every store into a result (a tree layer's token loop
    measured 1.7x slower).

    fff-run and the Python package bind the three to fff's host buffer
    cache (`fffHostAlloc`, `fffHostAlignedAlloc`, `fffHostFree` in
    `fff/Runtime/Runtime.h`), which keeps freed buffers of 128 KiB or more
    for the next allocation of their size: a model called again finds its
    results' pages already mapped instead of faulting each 4 KiB in (a
    LayerNorm of 4096x4096 f32 spent more than half its time there). The
    caller frees results with `fffHostFree`. A host without the cache can
    bind them to `malloc`, `aligned_alloc` and `free`.

    `--fff-cpu-pipeline` runs it when its `buffer-cache` option is set.

    Example:

    ```mlir
    // After: declared for the host, the allocations noalias.
    llvm.func @_mlir_memref_to_llvm_alloc(i64) -> (!llvm.ptr {llvm.noalias})
    ```
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def BlockParallelLoops : Pass<"fff-block-parallel-loops"> {
  let summary = "Split each parallel loop into one block of iterations per thread";
  let description = [{
    Rewrites each one-dimensional `scf.parallel` without reductions (the
    CPU lowering's loops over rows and tokens) into a parallel loop over as
    many blocks as there are threads, each a serial `scf.for` over a
    contiguous range of the iterations: `threads` blocks, or, with
    `threads=0`, as many as MLIR's async runtime has workers at run time
    (`async.runtime.num_worker_threads`); never more blocks than iterations.

    `async-parallel-for` then runs one task per block. Left to itself, it
    cuts a loop into up to eight tasks per worker, to balance the load; on
    this project's 2-core machine, three threads (the caller runs a block
    too) then took turns on two cores. Measured under fff.compile, a bf16
    RMSNorm of 1024x4096 took 0.94 ms in 16 tasks and 0.66 ms in 2;
    UltraFastBERT-1x11 at batch 4096, 2.28 and 2.18 ms (under fff-run, 2.35
    and 2.10-2.19 ms). Contiguous blocks also keep the tokens that a tree
    layer grouped by subtree on one core, with that subtree's weights.

    A block's iterations run in the loop's order and each iteration's work
    is unchanged, so the results are the same bits.

    `--fff-cpu-pipeline` runs it before `async-parallel-for` unless its
    `threads` option is 1.

    Example (`threads=0`):

    ```mlir
    // Before:
    scf.parallel (%row) = (%c0) to (%rows) step (%c1) { ... }
    // After:
    %workers = async.runtime.num_worker_threads : index
    %blocks = arith.minui %rows, %workers : index
    %size = arith.ceildivui %rows, %blocks : index
    scf.parallel (%block) = (%c0) to (%blocks) step (%c1) {
      ... %first = %block * %size, %end = min(%first + %size, %rows)
      scf.for %row = %first to %end step %c1 { ... }
    }
    ```
  }];
  let options = [
    Option<"threads", "threads", "int64_t", /*default=*/"0",
           "Blocks per loop: 0 takes the async runtime's worker threads at "
           "run time">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::async::AsyncDialect",
    "::mlir::scf::SCFDialect",
  ];
}

def ApproximateMath : Pass<"fff-approximate-math"> {
  let summary = "Replace f32 transcendental functions by inline polynomials";
  let description = [{
    Rewrites f32 (scalar and vector) `math.erf`, `erfc`, `exp`, `expm1`
    and `tanh`, the functions activations are made of, into MLIR's
    polynomial approximations: a handful of FMAs and selects, inlined where
    the function was called, that LLVM vectorizes like the code around
    them.

    The fast CPU pipeline runs it so that an activation costs no libm call
    (a GELU's `erff` cost a third of a tree layer's time) and a vector of
    activations stays a vector. The GPU kernels use the same
    approximations, so both targets compute the same functions; the
    pipeline's `reference` option keeps the C library's.

    Example:

    ```mlir
    %y = math.erf %x : vector<16xf32>
    // becomes a rational polynomial in %x: arith.mulf, math.fma,
    // arith.divf and arith.select on vector<16xf32>; no math.erf is left.
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::vector::VectorDialect",
  ];
}

#endif // FFF_TRANSFORMS_PASSES_TD
