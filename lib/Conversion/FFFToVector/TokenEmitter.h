//===- TokenEmitter.h - vector code over a tree layer's tokens -*- C++ -*-===//
//
// What the tree lowerings (TreesToVector.cpp) are built from: the dot
// products of tokens walking the tree together, the walks themselves, the
// output pass that adds scaled rows of weights into a token's sums (alone,
// or several tokens sharing the rows of their common path), the counting
// sort that regroups tokens, and the loops over tokens, threaded when
// large. The choices come from a CPUTreeStrategy.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_LIB_CONVERSION_FFFTOVECTOR_TOKENEMITTER_H
#define FFF_LIB_CONVERSION_FFFTOVECTOR_TOKENEMITTER_H

#include "VectorEmitter.h"
#include "fff/Conversion/FFFToVector/CPUTreeStrategy.h"
#include "fff/Conversion/RowLoops.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <functional>

namespace fff {

/// `prefix` followed by `last`: the indices of a row's element.
inline llvm::SmallVector<mlir::Value> at(mlir::ValueRange prefix,
                                         mlir::Value last) {
  llvm::SmallVector<mlir::Value> indices(prefix);
  indices.push_back(last);
  return indices;
}

/// The vector code of one token's work, and the loops over tokens.
class TokenEmitter : public VectorEmitter {
public:
  TokenEmitter(mlir::ImplicitLocOpBuilder &b, const CPUTreeStrategy &strategy)
      : VectorEmitter(b, strategy), strategy(strategy) {}

  /// The dot products of rows rows[k] of x with rows wAts[k] of w, over
  /// [0, n), interleaved, each into the strategy's tokenAccumulators (masked
  /// lanes load zeros, whose products add nothing). A token's dot product
  /// has the same bits whichever tokens it is interleaved with.
  llvm::SmallVector<mlir::Value>
  dotEach(mlir::Value x, mlir::ValueRange rows, mlir::Value w,
          llvm::ArrayRef<llvm::SmallVector<mlir::Value>> wAts, mlir::Value n) {
    return reduceEach(
        n, strategy.tokenAccumulators, rows.size(),
        [&](int64_t k, mlir::Value i, mlir::Value partial, mlir::Value mask) {
          return mlir::math::FmaOp::create(b, load(x, {rows[k], i}, mask),
                                           load(w, at(wAts[k], i), mask),
                                           partial)
              .getResult();
        });
  }

  /// `body(j, mask)` for each vector [j, j + lanes) of [0, n): the full ones
  /// without a mask, `accumulators` of them a step (independent updates the
  /// core can overlap), then the rest, the last one ragged and masked.
  void forEachVector(
      mlir::Value n,
      llvm::function_ref<void(mlir::Value j, mlir::Value mask)> body) {
    forEachStep(
        n, strategy.stepElements(),
        [&](mlir::Value j) {
          for (int64_t k = 0; k < strategy.accumulators; ++k)
            body(mlir::arith::AddIOp::create(b, j, index(k * lanes)),
                 mlir::Value());
        },
        body);
  }

  /// The f32 vector a row's sums start from at `column`, under `mask`.
  using RowStart =
      llvm::function_ref<mlir::Value(mlir::Value column, mlir::Value mask)>;

  /// Rows of a weight buffer to add, scaled, into the sums of one or more
  /// tokens: for u in [from, to), term(k, u) gives token k's scale and the
  /// indices of its row. With `sharedRows`, that row is the same for every
  /// token, and each of its vectors is loaded once for all of them.
  struct ScaledRows {
    mlir::Value from, to;
    bool sharedRows;
    std::function<std::pair<mlir::Value, llvm::SmallVector<mlir::Value>>(
        int64_t k, mlir::Value u)>
        term;
  };

  /// Writes a token's finished f32 vector of sums at (row, column), under
  /// `mask` if given.
  using RowWrite = llvm::function_ref<void(
      mlir::Value sums, mlir::Value row, mlir::Value column, mlir::Value mask)>;

  /// y[rows[k], j] = start(j) + the sum of scale * w[row..., j] over the
  /// terms of `groups`, in order, for j in [0, n) and each token k; `start`
  /// defaults to y[rows[k], j], and `write` (which may write elsewhere) to
  /// storing into y. Each token's rowVectors output vectors stay in
  /// registers across all the terms, so that y is read and written once,
  /// not once per term. A token's sums are built in the same order
  /// whichever tokens share the call, so they have the same bits.
  void addScaledRows(mlir::Value y, mlir::ValueRange rows, mlir::Value w,
                     mlir::Value n, llvm::ArrayRef<ScaledRows> groups,
                     RowStart start = nullptr, RowWrite write = nullptr) {
    int64_t tokens = rows.size();
    auto block = [&](mlir::Value j, int64_t vectors, mlir::Value mask) {
      llvm::SmallVector<mlir::Value> columns, totals;
      for (int64_t v = 0; v < vectors; ++v)
        columns.push_back(mlir::arith::AddIOp::create(b, j, index(v * lanes)));
      // Token k's vector v is carried at k * vectors + v.
      for (int64_t k = 0; k < tokens; ++k)
        for (mlir::Value column : columns)
          totals.push_back(start ? start(column, mask)
                                 : load(y, {rows[k], column}, mask));
      for (const ScaledRows &group : groups) {
        auto terms = mlir::scf::ForOp::create(
            b, group.from, group.to, index(1), totals,
            [&](mlir::OpBuilder &nested, mlir::Location, mlir::Value u,
                mlir::ValueRange partial) {
              BuildInside inside(b, nested);
              llvm::SmallVector<mlir::Value> scales, weights;
              for (int64_t k = 0; k < tokens; ++k) {
                auto [scale, rowAt] = group.term(k, u);
                scales.push_back(splat(scale));
                if (k == 0 || !group.sharedRows)
                  for (mlir::Value column : columns)
                    weights.push_back(load(w, at(rowAt, column), mask));
              }
              llvm::SmallVector<mlir::Value> next;
              for (auto [slot, total] : llvm::enumerate(partial)) {
                int64_t k = int64_t(slot) / vectors;
                int64_t v = int64_t(slot) % vectors;
                mlir::Value weight =
                    weights[(group.sharedRows ? 0 : k) * vectors + v];
                next.push_back(
                    mlir::math::FmaOp::create(b, scales[k], weight, total));
              }
              mlir::scf::YieldOp::create(b, next);
            });
        totals = llvm::to_vector_of<mlir::Value>(terms.getResults());
      }
      for (auto [slot, total] : llvm::enumerate(totals)) {
        mlir::Value row = rows[slot / vectors],
                    column = columns[slot % vectors];
        if (write)
          write(total, row, column, mask);
        else
          store(total, y, {row, column}, mask);
      }
    };
    int64_t vectors = rowVectors(tokens);
    forEachStep(
        n, vectors * lanes,
        [&](mlir::Value j) { block(j, vectors, mlir::Value()); },
        [&](mlir::Value j, mlir::Value mask) { block(j, 1, mask); });
  }

  /// The output vectors each of `tokens` tokens keeps in registers while
  /// addScaledRows adds rows into them: the strategy's accumulators, or
  /// fewer where they would not fit beside a scale and a weight vector.
  int64_t rowVectors(int64_t tokens) const {
    return std::clamp<int64_t>((strategy.vectorRegisters - 2) / tokens, 1,
                               strategy.accumulators);
  }

  /// buffer[row, j] = f(buffer[row, j]) for j in [from, to), a vector at a
  /// time, the last one masked; `buffer` is f32.
  void mapInPlace(mlir::Value buffer, mlir::Value row, int64_t from, int64_t to,
                  llvm::function_ref<mlir::Value(mlir::Value)> f) {
    auto vector = [&](mlir::Value j, mlir::Value mask) {
      mlir::Value column = mlir::arith::AddIOp::create(b, j, index(from));
      store(f(load(buffer, {row, column}, mask)), buffer, {row, column}, mask);
    };
    forEachStep(
        index(to - from), lanes,
        [&](mlir::Value j) { vector(j, mlir::Value()); }, vector);
  }

  /// dst[dstAt..., j] = src[srcAt..., j] (0 without a `src`) for j in [0,
  /// n), converted to dst's element type.
  void copy(mlir::Value dst, mlir::ValueRange dstAt, mlir::Value src,
            mlir::ValueRange srcAt, mlir::Value n) {
    forEachVector(n, [&](mlir::Value j, mlir::Value mask) {
      mlir::Value value = src ? load(src, at(srcAt, j), mask) : zeros();
      store(value, dst, at(dstAt, j), mask);
    });
  }

  /// buffer[indices], widened to f32.
  mlir::Value loadScalar(mlir::Value buffer, mlir::ValueRange indices) {
    mlir::Value value = mlir::memref::LoadOp::create(b, buffer, indices);
    if (value.getType().isF32())
      return value;
    return mlir::arith::ExtFOp::create(b, b.getF32Type(), value);
  }

  /// 2 * node + 1 + (goRight ? 1 : 0): the child a routing decision picks.
  mlir::Value child(mlir::Value node, mlir::Value goRight) {
    mlir::Value right = mlir::arith::IndexCastOp::create(
        b, b.getIndexType(),
        mlir::arith::ExtUIOp::create(b, b.getI64Type(), goRight));
    mlir::Value twice = mlir::arith::MulIOp::create(b, node, index(2));
    return mlir::arith::AddIOp::create(
        b, mlir::arith::AddIOp::create(b, twice, index(1)), right);
  }

  /// Whether all of `values` (indices, two or more) are equal.
  mlir::Value allEqual(mlir::ValueRange values) {
    mlir::Value all;
    for (mlir::Value value : values.drop_front()) {
      mlir::Value same = mlir::arith::CmpIOp::create(
          b, mlir::arith::CmpIPredicate::eq, value, values.front());
      all = all ? mlir::arith::AndIOp::create(b, all, same) : same;
    }
    return all;
  }

  /// `for level in [from, to)`, threading the nodes that tokens walking
  /// together are at through `step(level, nodes)`, which returns the next.
  /// Returns the nodes reached.
  llvm::SmallVector<mlir::Value> walkEach(
      mlir::ValueRange nodes, int64_t from, int64_t to,
      llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::Value level,
                                                        mlir::ValueRange nodes)>
          step) {
    if (from == to)
      return llvm::SmallVector<mlir::Value>(nodes);
    auto loop = mlir::scf::ForOp::create(
        b, index(from), index(to), index(1), nodes,
        [&](mlir::OpBuilder &nested, mlir::Location, mlir::Value level,
            mlir::ValueRange carried) {
          BuildInside inside(b, nested);
          mlir::scf::YieldOp::create(b, step(level, carried));
        });
    return llvm::SmallVector<mlir::Value>(loop.getResults());
  }

  /// The loop over groups of the strategy's walkTokens consecutive
  /// positions of [0, rows), threaded when it does at least the strategy's
  /// minimum of multiply-adds, counting `workPerToken` for each; then the
  /// positions left, one at a time. `body(positions)` builds a group.
  void
  forEachTokenGroup(mlir::Value rows, mlir::Value workPerToken,
                    llvm::function_ref<void(mlir::ValueRange positions)> body) {
    int64_t size = strategy.walkTokens;
    mlir::Value groups = mlir::arith::DivUIOp::create(b, rows, index(size));
    buildRowLoop(b, groups, mlir::arith::MulIOp::create(b, rows, workPerToken),
                 strategy.minParallelWork, strategy.toAttr(b.getContext()),
                 [&](mlir::Value group) {
                   mlir::Value first =
                       mlir::arith::MulIOp::create(b, group, index(size));
                   llvm::SmallVector<mlir::Value> positions{first};
                   for (int64_t k = 1; k < size; ++k)
                     positions.push_back(
                         mlir::arith::AddIOp::create(b, first, index(k)));
                   body(positions);
                 });
    loop(mlir::arith::MulIOp::create(b, groups, index(size)), rows,
         [&](mlir::Value position) { body(position); });
  }

  /// `body(position)` for the consecutive `positions` of a token group, one
  /// at a time in a loop, so that the body's code is emitted once rather
  /// than once per token.
  void inTurn(mlir::ValueRange positions,
              llvm::function_ref<void(mlir::Value position)> body) {
    mlir::Value end = mlir::arith::AddIOp::create(b, positions.front(),
                                                  index(positions.size()));
    loop(positions.front(), end, body);
  }

  /// A tree's walk regrouped at `sortLevel` (> 0; CPUTreeStrategy.h says
  /// why): groups of tokens in token order walk the levels above it
  /// (`walkTop(walkRows)` returns the nodes they reached, kept in `nodes`,
  /// one per token), the tokens are sorted stably by that node into
  /// `order`, and groups of consecutive sorted positions then go on from
  /// there: `rest(positions, walkRows, starts)`, with their tokens' rows and
  /// the nodes they start from. `topWork` and `restWork` are each part's
  /// multiply-adds per token (forEachTokenGroup).
  void forEachRegroupedTokenGroup(
      mlir::Value rows, int64_t sortLevel, mlir::Value nodes, mlir::Value order,
      mlir::Value topWork, mlir::Value restWork,
      llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::ValueRange)>
          walkTop,
      llvm::function_ref<void(mlir::ValueRange positions,
                              mlir::ValueRange walkRows,
                              mlir::ValueRange starts)>
          rest) {
    forEachTokenGroup(rows, topWork, [&](mlir::ValueRange walkRows) {
      for (auto [row, node] : llvm::zip(walkRows, walkTop(walkRows)))
        mlir::memref::StoreOp::create(b, node, nodes, row);
    });
    mlir::Value firstNode = index((int64_t(1) << sortLevel) - 1);
    sortTokens(order, rows, int64_t(1) << sortLevel,
               [&](mlir::Value token) -> mlir::Value {
                 return mlir::arith::SubIOp::create(
                     b, mlir::memref::LoadOp::create(b, nodes, token),
                     firstNode);
               });
    forEachTokenGroup(rows, restWork, [&](mlir::ValueRange positions) {
      llvm::SmallVector<mlir::Value> walkRows, starts;
      for (mlir::Value position : positions) {
        walkRows.push_back(mlir::memref::LoadOp::create(b, order, position));
        starts.push_back(
            mlir::memref::LoadOp::create(b, nodes, walkRows.back()));
      }
      rest(positions, walkRows, starts);
    });
  }

  /// Fills `order` with [0, rows) sorted stably by `key(token)`, a bucket in
  /// [0, buckets): a counting sort.
  void sortTokens(mlir::Value order, mlir::Value rows, int64_t buckets,
                  llvm::function_ref<mlir::Value(mlir::Value token)> key) {
    mlir::Value counts =
        alloc(mlir::MemRefType::get({buckets + 1}, b.getIndexType()));
    mlir::Value one = index(1);
    loop(index(0), index(buckets + 1), [&](mlir::Value bucket) {
      mlir::memref::StoreOp::create(b, index(0), counts, bucket);
    });
    // counts[k + 1] = tokens in bucket k; then counts[k] = the first
    // position of bucket k.
    loop(index(0), rows, [&](mlir::Value token) {
      mlir::Value slot = mlir::arith::AddIOp::create(b, key(token), one);
      mlir::Value count = mlir::memref::LoadOp::create(b, counts, slot);
      mlir::memref::StoreOp::create(
          b, mlir::arith::AddIOp::create(b, count, one), counts, slot);
    });
    loop(index(0), index(buckets), [&](mlir::Value bucket) {
      mlir::Value next = mlir::arith::AddIOp::create(b, bucket, one);
      mlir::Value sum = mlir::arith::AddIOp::create(
          b, mlir::memref::LoadOp::create(b, counts, bucket),
          mlir::memref::LoadOp::create(b, counts, next));
      mlir::memref::StoreOp::create(b, sum, counts, next);
    });
    loop(index(0), rows, [&](mlir::Value token) {
      mlir::Value bucket = key(token);
      mlir::Value position = mlir::memref::LoadOp::create(b, counts, bucket);
      mlir::memref::StoreOp::create(b, token, order, position);
      mlir::memref::StoreOp::create(
          b, mlir::arith::AddIOp::create(b, position, one), counts, bucket);
    });
  }

  /// The f32 sums of a tree layer's tokens, [rows, out], and its result:
  /// the sums themselves in f32, else a buffer they are narrowed into.
  std::pair<mlir::Value, mlir::Value>
  allocSums(mlir::RankedTensorType resultType, mlir::Value rows,
            mlir::Value out) {
    auto extent = [&](int64_t dim) { return dim == 0 ? rows : out; };
    mlir::Value sums = alloc(resultType, b.getF32Type(), extent);
    if (resultType.getElementType().isF32())
      return {sums, sums};
    return {sums, alloc(resultType, resultType.getElementType(), extent)};
  }

  /// A fresh index buffer of `rows` entries.
  mlir::Value allocIndices(mlir::Value rows) {
    return alloc(
        mlir::MemRefType::get({mlir::ShapedType::kDynamic}, b.getIndexType()),
        rows);
  }

  /// `for i in [lower, upper)` with nothing carried.
  void loop(mlir::Value lower, mlir::Value upper,
            llvm::function_ref<void(mlir::Value)> body) {
    forLoop(lower, upper, 1, body);
  }

  const CPUTreeStrategy &strategy;
};

} // namespace fff

#endif // FFF_LIB_CONVERSION_FFFTOVECTOR_TOKENEMITTER_H
