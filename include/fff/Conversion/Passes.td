//===- Passes.td - fff conversion passes -------------------*- tablegen -*-===//

#ifndef FFF_CONVERSION_PASSES_TD
#define FFF_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertFFFToLoops : Pass<"convert-fff-to-loops"> {
  let summary = "Lower fff ops to linalg reductions and scf loops (CPU reference)";
  let description = [{
    Gives every fff op an executable lowering that runs on any host, which
    is also the numeric oracle for the GPU kernels:

    * `fff.layer_norm` / `fff.rms_norm` become `linalg.generic` ops on
      tensors: f32 reductions over the normalized dims (two-pass mean and
      variance), then one elementwise op that normalizes, applies the affine
      parameters and casts back to the input element type;
    * `fff.layer_norm_grad` / `fff.rms_norm_grad` become `linalg.generic`
      ops on tensors too: the rows' sums of `g` and `g * xhat`, one
      elementwise op for `dx`, and one that sums `dy * xhat` and `dy` over
      the rows (in row order) for `dgamma` and `dbeta`. An `rms_norm_grad`
      without `rstd` first recomputes it as the forward does;
    * `fff.tree_ffn` / `fff.leaf_tree_ffn` become `scf.for` loops over
      buffers (`bufferization.to_buffer` of the operands, a fresh buffer for
      the result), because each row's path through the tree is data
      dependent. Accumulation is in f32. A `tree_ffn` of 2^19
      multiply-adds or more loops over its tokens with `scf.parallel`, which
      the CPU pipeline splits across threads.
    * `fff.tree_ffn_grad` becomes loops over buffers in three phases: each
      row walks its trees again, recording per tree and level the node, dl
      and act(l), and sums its dx row; a stable counting sort per tree then
      groups the visits by node; and each slab of 64 columns of `dw_in`
      and `dw_out` sums, for every node, its visits' terms in row order.
      The walk is threaded over rows and the sums over slabs (both
      `scf.parallel` from 2^19 multiply-adds), so no two threads write one
      element and the gradients have the same bits for any thread count,
      however unevenly the rows spread over the nodes. `db_in` and `db_out`
      are summed in row order.
    * `fff.leaf_tree_ffn_grad` becomes loops over buffers in four phases:
      each row is routed again (threaded over rows); a stable counting sort
      groups the rows by leaf and cuts each leaf's into tiles of 16; each
      row of a tile records act(pre) and dpre and computes its dx row
      (threaded over tiles, so that a leaf's weights stay in the cache from
      one row to the next; `w1` and `w2` are transposed first, so that each
      of pre, dpre and dx is a sum of scaled rows of a matrix); and each
      block of 32 rows of a leaf's `dw1` or `dw2` sums its terms over the
      leaf's rows in row order (threaded over blocks; a leaf's first `dw2`
      block also sums its `db1` and `db2`). No two threads write one
      element: the same bits for any thread count.

    All other ops are left alone. Run before bufferization.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def ConvertFFFNormsToVector : Pass<"convert-fff-norms-to-vector"> {
  let summary = "Lower fff norms to vector code over row loops (fast CPU path)";
  let description = [{
    Replaces each `fff.layer_norm` and `fff.rms_norm` with a loop over its
    rows (the leading dims, flattened) on buffers, whose body is vector
    code: reductions into several f32 vector accumulators, then one pass
    that normalizes, applies the affine parameters and narrows back to the
    element type. 16-bit elements are widened to f32 as they are loaded. A
    row's tail (its size modulo the vector width) uses masked loads and
    stores. Norms of 2^17 elements or more loop with `scf.parallel`, which
    the CPU pipeline splits across threads; smaller ones with `scf.for`.
    The rows are independent, so the result is the same whichever rows run
    together.

    `fff.layer_norm_grad` and `fff.rms_norm_grad` become a loop over
    blocks of rows: `max(1, min(rows, row_blocks))` blocks (`row_blocks` =
    64, recorded in `fff.strategy`), a function of the shape alone, threaded
    as the forward's rows are. Each block zeroes partial `dgamma`/`dbeta`
    rows of its own, then for each of its rows sums `g` and `g * xhat` (an
    `rms_norm_grad` without `rstd`: `x^2` and `g * x`) in vector
    accumulators, and in a second pass writes `dx` and adds the row's
    `dy * xhat` and `dy` into its partials. A row's second pass runs inside
    the loop of the next row's first, so that memory is read while the
    second pass reads the cache (4096x768 f32 out of the caches: 2.30-2.40
    ms, against 2.57-2.61 a pass at a time). The partial rows are then
    summed in block order. No two threads write one location, and the parameter
    gradients have the same bits for any thread count.

    A fused unit is inlined first. When the norm's input is computed by an
    elementwise `linalg.generic` that nothing else reads (a unit's prologue,
    such as a residual add), the norm computes it as it reads each row, lane
    by lane, and the generic goes away; so does a norm backward for `dy` and
    for `x` (a dropout's mask, the casts that widen them). Likewise, an
    elementwise generic that alone reads the norm's result (or a backward's
    `dx`) and gives f32, f16 or bf16 rows (the cast that narrows a
    mixed-type norm's f32 result, a residual add) is applied as each row is
    written: the norm's result is rounded to its own type as the unfused ops
    would store it, and only the generic's rows are stored.

    LayerNorm keeps the reference lowering's numerics: sums of `x - pivot`
    (the row's first element), then the centred sum of squares. The row is
    read three times, which costs one pass over memory when it fits in the
    cache.

    A result of `min_streamed_bytes` or more (32 MiB, on x86 hosts) whose
    buffer and rows start on whole vectors is written with streaming
    (non-temporal) stores, fenced after each row, instead of ordinary ones:
    an ordinary store first reads the line it overwrites, so a norm too
    large for the caches moved three bytes per byte of result. A LayerNorm
    of 4096x4096 f32 took 4.3-4.7 ms so, against 8.7-9.9 ms. Smaller
    results stay in the cache for whoever reads them next. A norm backward
    streams `dx` where `dy`, `x` and `dx` together move `min_streamed_bytes`
    or more (fenced at the end of each block of rows; its partial rows,
    read back at every row, are stored the ordinary way): a 4096x768 f32
    LayerNorm backward took 1.92 ms so, against 2.13.

    bf16 results are rounded with AVX512-BF16's `vcvtneps2bf16` where this
    host has it (and `integer-bf16` is not set); a vector holding a NaN or a
    subnormal, which the instruction treats otherwise, is rounded with
    integer operations instead, so the bits are the same either way.

    The vector width, the number of accumulators and the bf16 rounding are
    chosen in one place (`CPUNormStrategy.cpp`, `CPUVectorShape.cpp`), from
    `vector-bits` (0: the widest registers this host has), the row size and
    this host's features. They are recorded on the row loop as
    `fff.strategy`.

    Run before bufferization; `convert-fff-to-loops` lowers the other fff
    ops.

    Example (`vector-bits=512`, rows of 768 f32):

    ```mlir
    scf.parallel (%row) = (%c0) to (%rows) step (%c1) {
      ... vector.load %x[%row, %j] : memref<?x768xf32>, vector<16xf32> ...
    } {fff.strategy = {accumulators = 4 : i64, bf16_rounding = "avx512bf16",
                       lanes = 16 : i64,
                       min_parallel_elements = 131072 : i64,
                       min_streamed_bytes = 33554432 : i64, vector_bits = 512 : i64}}
    ```
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", /*default=*/"0",
           "Vector register width in bits: 128, 256 or 512; 0 takes this "
           "host's widest">,
    Option<"integerBf16", "integer-bf16", "bool", /*default=*/"false",
           "Round f32 to bf16 with integer operations even where this host "
           "has AVX512-BF16 (the same bits either way)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
    "::mlir::x86vector::X86VectorDialect",
  ];
}

def ConvertFFFTreesToVector : Pass<"convert-fff-trees-to-vector"> {
  let summary = "Lower fff tree layers to vector code over token loops (fast CPU path)";
  let description = [{
    Replaces each `fff.tree_ffn` and `fff.leaf_tree_ffn` with loops over its
    tokens on buffers, whose bodies are vector code: dot products into
    several f32 vector accumulators, with masked tails. A token's output
    row is written once per tree (`tree_ffn`) or per block of hidden units
    (`leaf_tree_ffn`), not once per node or unit: the walk records each
    level's node and logit, whose activations are then taken a vector at a
    time, off the walk's chain of dependent sums (for leaf_tree_ffn, its
    leaf's block of hidden activations); then a few vectors of the row,
    starting from the bias, stay in registers while the scaled rows of
    `w_out` (`w2`) of every level are added into them. 16-bit elements are
    widened to f32 as they are loaded; the f32 sums are narrowed once, when
    a token is done.

    Each level of a walk waits on the one before (its dot product, the
    comparison, the child's row), so tokens walk `walk_tokens` (4) at a
    time, their dot products interleaved, and the core works on one while
    another's sums complete. Each token keeps `token_accumulators` partial
    sums per dot product: the strategy's `accumulators`, or fewer where the
    walking tokens' would take more than half the vector registers (two
    with AVX2's 16, where four spilled). The output pass likewise keeps
    as many vectors of each token's row in registers as fit.

    A single tree's layer that moves 32 MiB or more (`min_streamed_bytes`:
    its input, weights and result, more than a last-level cache holds)
    writes its result with streaming stores on x86, fenced after each token
    group, where the result's rows start on whole vectors: an ordinary
    store first reads each line it overwrites, and the result would not
    stay cached for its reader anyway. UltraFastBERT-1x11 at batch 4096
    took 15-20% less time with both changes on this project's AVX2 machine.

    The tokens are regrouped once per tree, so that tokens that will read
    the same weights run one after the other and find them in the core's
    cache:

    - `fff.tree_ffn`: every token walks the top `sort_level` levels, in token
      order; the tokens are then counting-sorted (stably) by the node they
      reached, and walk the rest of the tree in that order. `sort_level` is
      the shallowest level whose subtrees' weights fit in half of
      `cache-bytes`; 0 (the whole tree fits) walks in token order.
    - `fff.leaf_tree_ffn`: every token is routed to its leaf; the tokens are
      sorted by leaf (by the leaf's ancestor at level 10 for deeper trees),
      and each computes its leaf's MLP, a vector of hidden units at a time.
      Four tokens in a row that reached one leaf compute it together, each
      vector of `w1` and `w2` loaded once for the four.

    Each token's arithmetic, and the order of its sums, is the same whatever
    the grouping and the thread split, so neither changes a bit of the
    result. Token loops of 2^19 multiply-adds or more are `scf.parallel`,
    which the CPU pipeline splits across threads.

    An elementwise `linalg.generic` that alone reads the layer's result,
    shaped like it (a pre-LN sublayer's residual add, a cast), whose other
    inputs are defined before the layer, is its epilogue: the layer applies
    it to each vector of a token's finished row (rounded to the layer's
    element type first, as the result would be) and stores what it yields,
    so the layer's own result is never written nor read back. A pre-LN
    TreeFFN sublayer of 4096x768 (UltraFastBERT-1x11) took 3.4 ms so,
    against 4.2 ms with the add a vector loop of its own.

    bf16 results are rounded as `convert-fff-norms-to-vector` rounds them.
    The choices are made in one place (`CPUTreeStrategy.cpp`) and recorded
    on the token loops as `fff.strategy`. `convert-fff-to-loops` keeps the
    scalar reference lowering.

    `fff.tree_ffn_grad` takes the reference lowering's three phases (the
    walk, the counting sort of the visits by node, the sums over column
    slabs) with vector code in the two that compute.
    - The walk is the forward's: tokens walk in groups with their logits'
      dot products interleaved, the levels below the strategy's sort level
      regrouped by the node reached there, each logit summed as
      `fff.tree_ffn`'s lowering here sums it (the same vector accumulators,
      in the same order), so the backward walks the forward's paths bit for
      bit, logits within rounding of 0 included. Then each group's visits:
      the dl dot products interleaved across its tokens, and each token's
      dx row held in registers while its levels' scaled `w_in` rows are
      added, in level order. The strategy is recorded on the token loops as
      `fff.strategy`, as the forward's.
    - Each slab is four vectors wide (64 f32 columns at 512 bits). Every
      row's columns of the slab are first packed, widened to f32, into a
      buffer of the slab's own (1 MiB at batch 4096), which stays in the
      core's cache while each level's visits read it; a node's visits are
      multiply-added into registers and stored once, rounded to the
      gradient's element type: on x86 hosts, a whole line at a time past
      the caches where its rows are whole slabs (streaming stores, fenced at
      the end of each slab; nothing here reads the gradient again, and an
      ordinary store first reads the line it writes; `stream_gradients` in
      `fff.strategy`). Every gradient element
      is still its node's visits summed in row order: the same bits for any
      thread count. The vector width is recorded on the threaded loops as
      `fff.strategy` (with `slab_columns`).

    The counting sort copies each visit's dl and act(l) into grouped order
    beside its row, so the sums read them in order.

    `fff.leaf_tree_ffn_grad` takes the reference lowering's four phases
    with vector code for its row operations: a routing score is the
    forward's dot product (`fff.leaf_tree_ffn`'s strategy, recorded as
    `fff.strategy`), so the backward routes each row as the forward did,
    bit for bit; a row times a matrix (pre, dpre, dx) and a leaf's sums
    over its rows take four rows (or gradient rows) at a time, each
    vector of the matrix (or source row) loaded once for the four, and
    keep up to four vectors of each one's result in registers while its
    terms are added in order, then store them once. Every element is still
    the sum of its terms in the reference lowering's order: the same bits
    for any thread count.

    UltraFastBERT-1x11's gradient at batch 4096 took 9.3-10.3 ms so on
    this project's 2-core machine (fff-run), against 14.8-19.0 ms with a
    walk one token at a time in token order and slabs read in place, 32 ms
    in scalar loops and 200-650 ms in torch ops.

    Run before bufferization.

    Example (`vector-bits=512 cache-bytes=2097152`, UltraFastBERT-1x11):

    ```mlir
    scf.for %tree = %c0 to %trees step %c1 {
      scf.if %large {
        scf.parallel (%row) = (%c0) to (%rows) step (%c1) {
          ... five levels of vector.fma, then memref.store %node, %nodes[%row]
        } {fff.strategy = {accumulators = 4 : i64, bf16_rounding = "avx512bf16",
                           cache_bytes = 2097152 : i64,
                           lanes = 16 : i64, min_parallel_work = 524288 : i64,
                           sort_level = 5 : i64, vector_bits = 512 : i64}}
      } else { ... }
      ... counting sort of %nodes into %order ...
      ... the other seven levels, for the token %order[%position] ...
    }
    ```
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", /*default=*/"0",
           "Vector register width in bits: 128, 256 or 512; 0 takes this "
           "host's widest">,
    Option<"cacheBytes", "cache-bytes", "int64_t", /*default=*/"0",
           "Per-core cache in bytes that regrouping sizes subtrees for; 0 "
           "takes this host's L2">,
    Option<"integerBf16", "integer-bf16", "bool", /*default=*/"false",
           "Round f32 to bf16 with integer operations even where this host "
           "has AVX512-BF16 (the same bits either way)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
    "::mlir::x86vector::X86VectorDialect",
  ];
}

def ConvertElementwiseToVector
    : Pass<"convert-elementwise-to-vector", "::mlir::ModuleOp"> {
  let summary = "Lower elementwise linalg ops to vector code over row loops "
                "(fast CPU path)";
  let description = [{
    Replaces each elementwise `linalg.generic` on tensors (the residual adds,
    casts, scales and activations around fff's ops) with a loop over its
    rows on buffers: the leading dims, flattened, split across threads from
    `min_parallel_elements` elements on (`scf.parallel`, which the CPU
    pipeline hands to fff's async runtime). Each row is computed a vector at
    a time along its last dim, the payload's ops applied lane by lane, and
    its tail (the last dim modulo the vector width) element by element with
    the payload as written. Each element goes through the same ops in the
    same order as under `convert-linalg-to-loops`, so the results are the
    same bits.

    An op qualifies when all its loops are parallel, its results use identity
    maps (and its payload does not read them), each input map selects
    dims in order or the constant 0 (a broadcast: an input without the last
    dim is loaded once per row), its tensors hold floats or integers of 8 to
    64 bits (not i1, whose vectors LLVM packs into bits), and its payload is
    elementwise `arith` and `math` ops. Others are left to
    `convert-linalg-to-loops`.

    The vector width is chosen in `CPUElementwiseStrategy.cpp` from
    `vector-bits` (0: the widest registers this host has), and recorded on
    the row loop as `fff.strategy`.

    With `outline` (the default), each kind of op (the same op, types and
    payload, applied to any values: a model's repeated layers repeat them)
    is lowered once, in a private function `fff_elementwise` that its ops
    call. The function takes the op's operands, then the non-constant
    values its payload reads from outside; it holds the constants. Lowered
    in place instead, the elementwise ops of 24 transformer layers doubled
    the CPU pipeline's time. Not outlining suits callers whose results
    become out-parameters, which a function's dynamic result extents would
    not survive.

    Run before bufferization, after `convert-elementwise-to-linalg`. The CPU
    pipeline runs it after the norm and tree lowerings, which compute the
    elementwise ops next to them themselves (a norm's prologue, a tree
    layer's epilogue).

    Example (`vector-bits=512`): `%x + %y` on `tensor<?x768xf32>` becomes

    ```mlir
    scf.parallel (%row) = (%c0) to (%rows) step (%c1) {
      scf.for %j = %c0 to %vectors step %c16 {
        %a = vector.load %x[%row, %j] : memref<?x768xf32>, vector<16xf32>
        %b = vector.load %y[%row, %j] : memref<?x768xf32>, vector<16xf32>
        %s = arith.addf %a, %b : vector<16xf32>
        vector.store %s, %sum[%row, %j] : memref<?x768xf32>, vector<16xf32>
      }
      scf.for %j = %vectors to %c768 step %c1 { ... scalars ... }
    } {fff.strategy = {lanes = 16 : i64, min_parallel_elements = 131072 : i64,
                       vector_bits = 512 : i64}}
    ```
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", /*default=*/"0",
           "Vector register width in bits: 128, 256 or 512; 0 takes this "
           "host's widest">,
    Option<"outline", "outline", "bool", /*default=*/"true",
           "Lower each kind of elementwise op once, in a function its ops "
           "call">,
  ];
  let dependentDialects = [
    "::mlir::affine::AffineDialect",
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
}

def ConvertFFFToGPU : Pass<"convert-fff-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Lower fff ops to one GPU kernel each";
  let description = [{
    Replaces each `fff.layer_norm`, `fff.rms_norm`, `fff.fusion`,
    `fff.tree_ffn` and `fff.leaf_tree_ffn` by a `gpu.launch_func` of its own
    kernel, a `gpu.func` in the module's `gpu.module @fff_kernels` named
    after the op, its shape and its strategy. The strategy is chosen from
    static shapes and element types in one place (`KernelStrategy.cpp`) and
    recorded on the kernel as `fff.strategy`, with its register budget as
    `nvvm.maxnreg`:

    - norms: warp per row, block per row, or looped, over a grid of rows;
    - tree layers: a warp per token (its lanes split each level's dot
      product and the output row), in two kernels the host picks between
      by batch size: `latency` (two levels a step) and `throughput`
      (resident blocks, top levels staged in shared memory); `tree-variant`
      keeps only one;
    - sublayer units (a norm and a tree layer in one `fff.fusion`): the
      tree kernels, whose warp also normalizes its token, into a row of
      shared memory that the walk reads (pre-LN), or after the walk from
      the tree's output row (post-LN), and evaluates the unit's pointwise
      ops on those rows; named for the ops in the order they run
      (`fused_layer_norm_tree_ffn_...`, `fused_tree_ffn_layer_norm_...`).
      A sublayer unit the kernel does not take is split, with a remark
      that says why, into its tree layer and its norm's own unit;
    - norm backward ops (`fff.layer_norm_grad`, `fff.rms_norm_grad`): two
      kernels, `<op>_<type>_<size>_<strategy>` for dx and per-block
      partial rows of dgamma and dbeta in f32 (the forward's row layouts;
      each block sums a fixed range of rows in order), and
      `..._column_sums`, launched only where a parameter gradient is used,
      which adds the partial rows in block order. No atomics: the same bits
      on every run;
    - `fff.tree_ffn_grad`: seven kernels, `tree_ffn_grad_<type>_<Din>x<Dout>_
      depth<d>[_trees<k>]_<phase>`: the walk (the forward's throughput
      kernel, whose visits also take dot(dy, w_out[node]), record dl and
      sum dx), a stable counting sort of each tree's visits by node
      (`count`, `scan`, `scatter`), the weight sums (`chunk_sums`, a block
      per 256 sorted visits, each column summed over each node's run in row
      order, as partial rows where a node spans chunks; `node_sums`, a
      block per node adding those in chunk order) and `output_bias`. No
      atomics: the same bits on every run;
    - `fff.leaf_tree_ffn_grad`: five kernels, named likewise: the walk (the
      leaf forward's throughput kernel, which then takes each unit's
      dpre = dot(dy, w2[leaf, u]) * act'(pre), stores it with act(pre) and
      the leaf, and writes dx = w1[leaf] dpre), the same counting sort of
      the rows by leaf, and `sums` (a block per leaf and 128 columns, each
      column of dw1, dw2 and db2 summed over the leaf's rows in row order,
      up to 16 units a pass; db1 by the first block). Leaves of up to 64
      units, as in the forward. No atomics.

    Transcendental math in kernels (erf, tanh, exp in activations and fused
    epilogues) becomes MLIR's f32 polynomial approximations, so no kernel
    needs libdevice. Operands are viewed as matrices
    (`tensor.collapse_shape` then `bufferization.to_buffer`); results are
    fresh buffers. Run before bufferization. An op no kernel takes is an
    error that says why.

    With `cpu-twin`, each op becomes instead its kernel's CPU twin: the same
    per-lane code in loops over rows (or tokens) and lanes, with every
    reduction replaying the GPU's shuffle butterfly on a buffer, and the
    same math approximations. The CPU pipeline runs it with `gpu-twin`, and
    `fff-run --gpu-twin` executes it, which is how the tests check each
    kernel's arithmetic without a GPU. Ops without a kernel, and the
    backward ops (whose kernels have no twin; the emulator runs them), are
    left for the CPU lowering.
  }];
  let options = [
    Option<"cpuTwin", "cpu-twin", "bool", /*default=*/"false",
           "Emit each kernel's CPU-executable twin instead of a gpu.launch">,
    Option<"treeVariant", "tree-variant", "std::string", /*default=*/"\"auto\"",
           "Tree kernels to emit: auto (latency and throughput, picked by "
           "batch size), latency or throughput">,
    Option<"treeStaging", "tree-staging", "bool", /*default=*/"true",
           "Stage the top tree levels in shared memory in throughput kernels "
           "where the shape allows">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::vector::VectorDialect",
  ];
}

def ConvertLinalgToGPUKernels
    : Pass<"convert-linalg-to-gpu-kernels", "::mlir::ModuleOp"> {
  let summary = "Lower the linalg ops left in host code to one GPU kernel each";
  let description = [{
    After bufferization, the work around fff's ops (matmuls, attention,
    activations, residual adds, copies) is linalg ops on buffers in host
    functions. This pass gives each its own kernel in
    `gpu.module @fff_kernels` and replaces it by the launch, so that a whole
    model compiles for the GPU. `memref.copy` becomes a copy kernel first.

    - Contractions (`linalg.matmul`, `linalg.batch_matmul`, a generic that
      computes `out + a * b` over one reduction dim, through any indexing
      maps) of f32, f16 or bf16 take a tiled kernel: tiles of both operands
      staged in shared memory as f32, f32 accumulation in registers, C added
      once. It records `unoptimized = true` in `fff.strategy`: correct for
      any shape and layout, but no tensor cores, no vector loads, no double
      buffering.
    - Every other linalg op takes a loop-nest kernel: one thread per point
      of its parallel loops, the reduction loops walked by that thread, the
      body evaluated as written.

    Strategies come from `KernelStrategy.cpp`, like fff's own kernels'. A
    body holding an op with no GPU lowering is an error that names it. Run
    after bufferization, before outlining-free launch lowering; elementwise
    fusion on tensors beforehand makes each fusible group one op, and so
    one kernel.
  }];
  let dependentDialects = [
    "::mlir::affine::AffineDialect",
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
  ];
}

#endif // FFF_CONVERSION_PASSES_TD
