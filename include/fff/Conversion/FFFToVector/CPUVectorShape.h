//===- CPUVectorShape.h - the vectors CPU loops fill ------------*- C++ -*-===//
//
// What every CPU vector lowering decides first, in one place: how wide its
// vectors are (from the target's registers: AVX-512, AVX2 or SSE), how
// many independent partial sums its reductions keep, and how f32 results
// are rounded to bf16. The norm and tree strategies build on it.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_CONVERSION_FFFTOVECTOR_CPUVECTORSHAPE_H
#define FFF_CONVERSION_FFFTOVECTOR_CPUVECTORSHAPE_H

#include "mlir/IR/Builders.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>
#include <optional>

namespace fff {

/// What a CPU lowering is told about the machine it compiles for, beyond
/// what it finds out about this host.
struct CPUTarget {
  /// Vector register width in bits (128, 256 or 512); 0: this host's widest.
  int64_t vectorBits = 0;
  /// Round to bf16 with integer operations even where this host has
  /// AVX512-BF16.
  bool integerBf16 = false;
};

struct CPUVectorShape {
  /// Bits of one vector register the loops fill (512, 256 or 128).
  int64_t vectorBits;
  /// f32 lanes per vector: all arithmetic is in f32, 16-bit elements are
  /// widened as they are loaded.
  int64_t lanes;
  /// Independent partial sums per reduction; each vector add waits only for
  /// the one `accumulators` steps back.
  int64_t accumulators;
  /// The vector registers the target has (x86-64: 32 with AVX-512, else
  /// 16): loops that keep several tokens' sums in registers size their
  /// blocks to fit, since a block one register too large spills.
  int64_t vectorRegisters;
  /// Whether f32 vectors are rounded to bf16 with AVX512-BF16's
  /// vcvtneps2bf16, else with integer operations. Both round to nearest,
  /// ties to even; the few vectors holding a NaN or a subnormal, which the
  /// instruction treats otherwise, take the integer rounding, so the two
  /// give the same bits.
  bool avx512Bf16;

  /// Elements one step of a reduction loop covers.
  int64_t stepElements() const { return lanes * accumulators; }

  /// The shape's entries of a `fff.strategy` attribute.
  void appendAttrs(mlir::Builder &b,
                   llvm::SmallVectorImpl<mlir::NamedAttribute> &attrs) const;
};

/// The widest vector registers this machine's CPU has: 512 with AVX-512F,
/// 256 with AVX2, else 128.
int64_t hostVectorBits();

/// Whether this machine's CPU has AVX512-BF16.
bool hostHasAVX512Bf16();

/// The fewest bytes a loop must move, on this host, before its results are
/// worth writing with streaming stores: about a last-level cache's worth,
/// past which what it writes would not stay cached for its reader anyway.
/// 0 (never) on hosts other than x86.
int64_t hostMinStreamedBytes();

/// Fails with a one-line error on `op` unless `vectorBits` is 0 (this
/// host's), 128, 256 or 512.
mlir::LogicalResult checkVectorBits(mlir::Operation *op, int64_t vectorBits);

/// The shape for reductions over rows of `rowSize` elements (nullopt when
/// dynamic) on `target`'s vector registers, rounding to bf16 with
/// AVX512-BF16 where this host has it and `target` allows it.
CPUVectorShape selectCPUVectorShape(std::optional<int64_t> rowSize,
                                    const CPUTarget &target);

} // namespace fff

#endif // FFF_CONVERSION_FFFTOVECTOR_CPUVECTORSHAPE_H
