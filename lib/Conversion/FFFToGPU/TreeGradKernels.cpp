//===- TreeGradKernels.cpp - fff.tree_ffn_grad's sort and sum kernels ----===//

#include "TreeGradKernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace fff;

namespace {

class TreeGradKernelEmitter {
public:
  TreeGradKernelEmitter(ImplicitLocOpBuilder &b, const TreeGradStrategy &s,
                        const TreeGradProblem &p)
      : b(b), s(s), p(p), chunks(s.sortChunks), nodes(p.nodesPerTree),
        levels(p.levels) {}

  /// Thread (k, c) counts chunk c's visits to each node of tree k.
  void count(Value threadId, Value blockId) {
    forSortThread(threadId, blockId, [&](Value tree, Value chunk) {
      Value first = countIndex(tree, index(0), chunk);
      loop(index(0), index(nodes), index(1), {}, [&](Value node, ValueRange) {
        memref::StoreOp::create(b, i32(0), p.counts,
                                ValueRange{at(first, node)});
        return SmallVector<Value>{};
      });
      forChunkVisits(tree, chunk, [&](Value, Value, Value node) {
        Value slot = at(first, node);
        Value seen = memref::LoadOp::create(b, p.counts, ValueRange{slot});
        memref::StoreOp::create(b, arith::AddIOp::create(b, seen, i32(1)),
                                p.counts, ValueRange{slot});
      });
    });
  }

  /// Block k: the exclusive prefix sums of tree k's counts, node-major,
  /// each thread taking a contiguous segment; the sums of the segments are
  /// scanned by thread 0 in `shared`.
  void scan(Value threadId, Value blockId, Value shared) {
    int64_t entries = nodes * chunks;
    int64_t segment = llvm::divideCeilSigned(entries, s.sortThreads);
    Value tree = blockId;
    Value base = arith::MulIOp::create(b, tree, index(entries));
    Value begin = arith::MulIOp::create(b, threadId, index(segment));
    Value end = arith::MinUIOp::create(
        b, arith::AddIOp::create(b, begin, index(segment)), index(entries));
    auto entryAt = [&](Value e) { return arith::AddIOp::create(b, base, e); };
    Value total =
        loop(begin, end, index(1), {i32(0)}, [&](Value e, ValueRange sum) {
          Value count =
              memref::LoadOp::create(b, p.counts, ValueRange{entryAt(e)});
          return SmallVector<Value>{arith::AddIOp::create(b, sum[0], count)};
        })[0];
    memref::StoreOp::create(b, total, shared, ValueRange{threadId});
    gpu::BarrierOp::create(b);
    Value isFirstThread =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, threadId, index(0));
    ifThen(isFirstThread, [&] {
      loop(index(0), index(s.sortThreads), index(1), {i32(0)},
           [&](Value t, ValueRange running) {
             Value sum = memref::LoadOp::create(b, shared, ValueRange{t});
             memref::StoreOp::create(b, running[0], shared, ValueRange{t});
             return SmallVector<Value>{
                 arith::AddIOp::create(b, running[0], sum)};
           });
    });
    gpu::BarrierOp::create(b);
    Value starts = arith::MulIOp::create(b, tree, index(nodes + 1));
    Value segmentStart =
        memref::LoadOp::create(b, shared, ValueRange{threadId});
    loop(begin, end, index(1), {segmentStart}, [&](Value e, ValueRange offset) {
      Value count = memref::LoadOp::create(b, p.counts, ValueRange{entryAt(e)});
      memref::StoreOp::create(b, offset[0], p.counts, ValueRange{entryAt(e)});
      Value firstChunk = arith::CmpIOp::create(
          b, arith::CmpIPredicate::eq,
          arith::RemUIOp::create(b, e, index(chunks)), index(0));
      ifThen(firstChunk, [&] {
        Value node = arith::DivUIOp::create(b, e, index(chunks));
        memref::StoreOp::create(
            b, offset[0], p.bucketStarts,
            ValueRange{arith::AddIOp::create(b, starts, node)});
      });
      return SmallVector<Value>{arith::AddIOp::create(b, offset[0], count)};
    });
    ifThen(isFirstThread, [&] {
      Value visits = arith::MulIOp::create(b, p.rows, index(levels));
      memref::StoreOp::create(
          b, arith::IndexCastOp::create(b, b.getI32Type(), visits),
          p.bucketStarts,
          ValueRange{arith::AddIOp::create(b, starts, index(nodes))});
    });
  }

  /// Thread (k, c) places chunk c's visits of tree k, in row order, at the
  /// slots the scan gave.
  void scatter(Value threadId, Value blockId) {
    forSortThread(threadId, blockId, [&](Value tree, Value chunk) {
      Value first = countIndex(tree, index(0), chunk);
      forChunkVisits(tree, chunk, [&](Value row, Value level, Value node) {
        Value slot = at(first, node);
        Value position = memref::LoadOp::create(b, p.counts, ValueRange{slot});
        Value visit = arith::AddIOp::create(
            b, arith::MulIOp::create(b, row, index(levels)), level);
        memref::StoreOp::create(
            b, arith::IndexCastOp::create(b, b.getI32Type(), visit), p.members,
            ValueRange{tree, arith::IndexCastOp::create(b, b.getIndexType(),
                                                        position)});
        memref::StoreOp::create(b, arith::AddIOp::create(b, position, i32(1)),
                                p.counts, ValueRange{slot});
      });
    });
  }

  /// Block k * N + n: node n of tree k's weight gradients, a thread per
  /// column, each summing over the node's visits in row order.
  void sums(Value threadId, Value blockId) {
    Value tree = arith::DivUIOp::create(b, blockId, index(nodes));
    Value node = arith::RemUIOp::create(b, blockId, index(nodes));
    Value startsAt = arith::AddIOp::create(
        b, arith::MulIOp::create(b, tree, index(nodes + 1)), node);
    auto start = [&](Value at) {
      return arith::IndexCastOp::create(
          b, b.getIndexType(),
          memref::LoadOp::create(b, p.bucketStarts, ValueRange{at}));
    };
    Value begin = start(startsAt);
    Value end = start(arith::AddIOp::create(b, startsAt, index(1)));
    // Visit `m` of the node: its row and its entry in the visit buffers.
    auto visitAt = [&](Value m) -> std::pair<Value, Value> {
      Value visit = arith::IndexCastOp::create(
          b, b.getIndexType(),
          memref::LoadOp::create(b, p.members, ValueRange{tree, m}));
      Value row = arith::DivUIOp::create(b, visit, index(levels));
      Value entry = arith::AddIOp::create(
          b, arith::MulIOp::create(b, tree, index(levels)),
          arith::RemUIOp::create(b, visit, index(levels)));
      return {row, entry};
    };
    auto columnSums = [&](Value width, Value source, Value coefficients,
                          Value gradient) {
      loop(
          threadId, width, index(s.sumThreads), {}, [&](Value col, ValueRange) {
            Value sum = loop(
                begin, end, index(1), {f32(0.0)}, [&](Value m, ValueRange acc) {
                  auto [row, entry] = visitAt(m);
                  Value coefficient = memref::LoadOp::create(
                      b, coefficients, ValueRange{row, entry});
                  Value value = widen(
                      memref::LoadOp::create(b, source, ValueRange{row, col}));
                  return SmallVector<Value>{
                      math::FmaOp::create(b, coefficient, value, acc[0])};
                })[0];
            memref::StoreOp::create(b, narrow(sum), gradient,
                                    ValueRange{blockId, col});
            return SmallVector<Value>{};
          });
    };
    columnSums(p.inWidth, p.input, p.visitGrads, p.gradInWeights);
    columnSums(p.outWidth, p.gradOutput, p.visitActivations, p.gradOutWeights);
    if (!p.gradInBias)
      return;
    ifThen(
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, threadId, index(0)),
        [&] {
          Value sum = loop(
              begin, end, index(1), {f32(0.0)}, [&](Value m, ValueRange acc) {
                auto [row, entry] = visitAt(m);
                Value dl = memref::LoadOp::create(b, p.visitGrads,
                                                  ValueRange{row, entry});
                return SmallVector<Value>{arith::AddFOp::create(b, acc[0], dl)};
              })[0];
          memref::StoreOp::create(b, narrow(sum), p.gradInBias,
                                  ValueRange{blockId});
        });
  }

  /// A thread per column of db_out: dy summed over the rows in order.
  void outputBias(Value threadId, Value blockId) {
    Value col = arith::AddIOp::create(
        b, arith::MulIOp::create(b, blockId, index(s.sumThreads)), threadId);
    ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::ult, col, p.outWidth),
           [&] {
             Value sum = loop(index(0), p.rows, index(1), {f32(0.0)},
                              [&](Value row, ValueRange acc) {
                                Value dy = widen(memref::LoadOp::create(
                                    b, p.gradOutput, ValueRange{row, col}));
                                return SmallVector<Value>{
                                    arith::AddFOp::create(b, acc[0], dy)};
                              })[0];
             memref::StoreOp::create(b, narrow(sum), p.gradOutBias,
                                     ValueRange{col});
           });
  }

private:
  /// Runs `body(tree, chunk)` in the count and scatter kernels' threads,
  /// one per (tree, chunk).
  void forSortThread(Value threadId, Value blockId,
                     function_ref<void(Value tree, Value chunk)> body) {
    Value thread = arith::AddIOp::create(
        b, arith::MulIOp::create(b, blockId, index(s.sortThreads)), threadId);
    ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::ult, thread,
                                 index(p.trees * chunks)),
           [&] {
             body(arith::DivUIOp::create(b, thread, index(chunks)),
                  arith::RemUIOp::create(b, thread, index(chunks)));
           });
  }

  /// `body(row, level, node)` for each visit of chunk `chunk`'s rows to
  /// `tree`, in row order, then level order.
  void forChunkVisits(Value tree, Value chunk,
                      function_ref<void(Value, Value, Value)> body) {
    Value first = arith::MulIOp::create(b, chunk, p.rowsPerChunk);
    Value last = arith::MinUIOp::create(
        b, arith::AddIOp::create(b, first, p.rowsPerChunk), p.rows);
    Value treeEntry = arith::MulIOp::create(b, tree, index(levels));
    loop(first, last, index(1), {}, [&](Value row, ValueRange) {
      loop(index(0), index(levels), index(1), {}, [&](Value level, ValueRange) {
        Value node = arith::IndexCastOp::create(
            b, b.getIndexType(),
            memref::LoadOp::create(
                b, p.visitNodes,
                ValueRange{row, arith::AddIOp::create(b, treeEntry, level)}));
        body(row, level, node);
        return SmallVector<Value>{};
      });
      return SmallVector<Value>{};
    });
  }

  /// counts[(tree * N + node) * chunks + chunk].
  Value countIndex(Value tree, Value node, Value chunk) {
    Value treeNode = arith::AddIOp::create(
        b, arith::MulIOp::create(b, tree, index(nodes)), node);
    return arith::AddIOp::create(
        b, arith::MulIOp::create(b, treeNode, index(chunks)), chunk);
  }
  /// The count of `node`, given its tree and chunk's count of node 0.
  Value at(Value first, Value node) {
    return arith::AddIOp::create(b, first,
                                 arith::MulIOp::create(b, node, index(chunks)));
  }

  SmallVector<Value>
  loop(Value lower, Value upper, Value step, ValueRange inits,
       function_ref<SmallVector<Value>(Value, ValueRange)> body) {
    auto forOp = scf::ForOp::create(b, lower, upper, step, inits);
    OpBuilder::InsertionGuard guard(b);
    // Without iteration values the body already ends in its yield.
    if (inits.empty())
      b.setInsertionPoint(forOp.getBody()->getTerminator());
    else
      b.setInsertionPointToEnd(forOp.getBody());
    SmallVector<Value> next =
        body(forOp.getInductionVar(), forOp.getRegionIterArgs());
    if (!inits.empty())
      scf::YieldOp::create(b, next);
    return llvm::to_vector_of<Value>(forOp.getResults());
  }
  void ifThen(Value condition, function_ref<void()> body) {
    auto ifOp = scf::IfOp::create(b, condition);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    body();
  }
  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value i32(int64_t v) { return arith::ConstantIntOp::create(b, v, 32); }
  Value f32(double v) {
    return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
  }
  Value widen(Value v) {
    return v.getType().isF32() ? v
                               : arith::ExtFOp::create(b, b.getF32Type(), v);
  }
  Value narrow(Value v) {
    return p.elementType.isF32() ? v
                                 : arith::TruncFOp::create(b, p.elementType, v);
  }

  ImplicitLocOpBuilder &b;
  const TreeGradStrategy &s;
  const TreeGradProblem &p;
  int64_t chunks, nodes, levels;
};

} // namespace

void fff::emitTreeGradCount(ImplicitLocOpBuilder &b,
                            const TreeGradStrategy &strategy,
                            const TreeGradProblem &problem, Value threadId,
                            Value blockId) {
  TreeGradKernelEmitter(b, strategy, problem).count(threadId, blockId);
}

void fff::emitTreeGradScan(ImplicitLocOpBuilder &b,
                           const TreeGradStrategy &strategy,
                           const TreeGradProblem &problem, Value threadId,
                           Value blockId, Value shared) {
  TreeGradKernelEmitter(b, strategy, problem).scan(threadId, blockId, shared);
}

void fff::emitTreeGradScatter(ImplicitLocOpBuilder &b,
                              const TreeGradStrategy &strategy,
                              const TreeGradProblem &problem, Value threadId,
                              Value blockId) {
  TreeGradKernelEmitter(b, strategy, problem).scatter(threadId, blockId);
}

void fff::emitTreeGradSums(ImplicitLocOpBuilder &b,
                           const TreeGradStrategy &strategy,
                           const TreeGradProblem &problem, Value threadId,
                           Value blockId) {
  TreeGradKernelEmitter(b, strategy, problem).sums(threadId, blockId);
}

void fff::emitTreeGradOutputBias(ImplicitLocOpBuilder &b,
                                 const TreeGradStrategy &strategy,
                                 const TreeGradProblem &problem, Value threadId,
                                 Value blockId) {
  TreeGradKernelEmitter(b, strategy, problem).outputBias(threadId, blockId);
}
