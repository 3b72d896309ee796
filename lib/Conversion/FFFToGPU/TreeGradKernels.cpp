//===- TreeGradKernels.cpp - the tree gradients' sorts and sums -----------===//

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

  /// Block k * C + c: chunk c of tree k's sorted visits (`visitsPerChunk`
  /// of them), a run of visits per node in it. A thread per column (of
  /// dw_in, then dw_out) sums each run's dl * x and act * dy in order; the
  /// first thread sums its dl (db_in). A node whose visits all lie in the
  /// chunk gets its gradient rows stored; a run of a node that spans chunks
  /// is stored as a partial row, the chunk's head (the run that began in an
  /// earlier chunk) or tail (the run that goes on after it).
  void chunkSums(Value threadId, Value blockId) {
    Value chunks = p.chunks;
    Value tree = arith::DivUIOp::create(b, blockId, chunks);
    Value chunk = arith::RemUIOp::create(b, blockId, chunks);
    Value visits = arith::MulIOp::create(b, p.rows, index(levels));
    Value lo = arith::MulIOp::create(b, chunk, index(s.visitsPerChunk));
    Value hi = arith::MinUIOp::create(
        b, arith::AddIOp::create(b, lo, index(s.visitsPerChunk)), visits);
    Value treeStarts = arith::MulIOp::create(b, tree, index(nodes + 1));
    auto nodeOf = [&](Value m) {
      auto [row, entry] = visitAt(tree, m);
      return arith::IndexCastOp::create(
          b, b.getIndexType(),
          memref::LoadOp::create(b, p.visitNodes, ValueRange{row, entry}));
    };
    auto lessThan = [&](Value x, Value y) {
      return arith::CmpIOp::create(b, arith::CmpIPredicate::ult, x, y);
    };
    auto whileOp =
        scf::WhileOp::create(b, TypeRange{b.getIndexType()}, ValueRange{lo});
    {
      OpBuilder::InsertionGuard guard(b);
      Block *before = b.createBlock(&whileOp.getBefore(), {},
                                    {b.getIndexType()}, {b.getLoc()});
      Value m = before->getArgument(0);
      scf::ConditionOp::create(b, lessThan(m, hi), ValueRange{m});
      Block *after = b.createBlock(&whileOp.getAfter(), {}, {b.getIndexType()},
                                   {b.getLoc()});
      Value runStart = after->getArgument(0);
      Value node = nodeOf(runStart);
      Value startsAt = arith::AddIOp::create(b, treeStarts, node);
      Value nodeStart = bucketStart(startsAt);
      Value nodeEnd = bucketStart(arith::AddIOp::create(b, startsAt, index(1)));
      Value runEnd = arith::MinUIOp::create(b, nodeEnd, hi);
      Value beganBefore = lessThan(nodeStart, lo);
      Value goesOn = lessThan(hi, nodeEnd);
      Value whole = arith::AndIOp::create(
          b, arith::XOrIOp::create(b, beganBefore, i1(true)),
          arith::XOrIOp::create(b, goesOn, i1(true)));
      // The run's destination: the node's gradient rows, or the chunk's
      // head or tail partial row.
      Value row = arith::AddIOp::create(
          b, arith::MulIOp::create(b, tree, index(nodes)), node);
      Value slot = arith::AddIOp::create(
          b, arith::MulIOp::create(b, blockId, index(2)),
          arith::SelectOp::create(b, beganBefore, index(0), index(1)));
      Value outWidth = p.outWidth;
      auto store = [&](Value sum, Value gradient, ValueRange at,
                       Value partialColumn) {
        auto choice = scf::IfOp::create(b, whole, /*withElseRegion=*/true);
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPoint(choice.thenBlock()->getTerminator());
        memref::StoreOp::create(b, narrow(sum), gradient, at);
        b.setInsertionPoint(choice.elseBlock()->getTerminator());
        memref::StoreOp::create(b, sum, p.partials,
                                ValueRange{slot, partialColumn});
      };
      auto runSums = [&](Value width, Value source, Value coefficients,
                         Value gradient, Value firstPartialColumn) {
        loop(threadId, width, index(s.sumThreads), {},
             [&](Value col, ValueRange) {
               Value sum = loop(runStart, runEnd, index(1), {f32(0.0)},
                                [&](Value m, ValueRange acc) {
                                  auto [r, entry] = visitAt(tree, m);
                                  Value coefficient = memref::LoadOp::create(
                                      b, coefficients, ValueRange{r, entry});
                                  Value value = widen(memref::LoadOp::create(
                                      b, source, ValueRange{r, col}));
                                  return SmallVector<Value>{math::FmaOp::create(
                                      b, coefficient, value, acc[0])};
                                })[0];
               store(sum, gradient, ValueRange{row, col},
                     arith::AddIOp::create(b, firstPartialColumn, col));
               return SmallVector<Value>{};
             });
      };
      runSums(p.inWidth, p.input, p.visitGrads, p.gradInWeights, index(0));
      runSums(outWidth, p.gradOutput, p.visitActivations, p.gradOutWeights,
              p.inWidth);
      if (p.gradInBias)
        ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, threadId,
                                     index(0)),
               [&] {
                 Value sum = loop(runStart, runEnd, index(1), {f32(0.0)},
                                  [&](Value m, ValueRange acc) {
                                    auto [r, entry] = visitAt(tree, m);
                                    Value dl = memref::LoadOp::create(
                                        b, p.visitGrads, ValueRange{r, entry});
                                    return SmallVector<Value>{
                                        arith::AddFOp::create(b, acc[0], dl)};
                                  })[0];
                 store(sum, p.gradInBias, ValueRange{row},
                       arith::AddIOp::create(b, p.inWidth, outWidth));
               });
      scf::YieldOp::create(b, ValueRange{runEnd});
    }
  }

  /// Block k * N + n: node n of tree k, a thread per column. A node no row
  /// visited gets zeros; one whose visits span chunks gets the sum, in
  /// chunk order, of its first chunk's tail and the later chunks' heads;
  /// the chunk kernel stored the others' rows.
  void nodeSums(Value threadId, Value blockId) {
    Value tree = arith::DivUIOp::create(b, blockId, index(nodes));
    Value node = arith::RemUIOp::create(b, blockId, index(nodes));
    Value startsAt = arith::AddIOp::create(
        b, arith::MulIOp::create(b, tree, index(nodes + 1)), node);
    Value begin = bucketStart(startsAt);
    Value end = bucketStart(arith::AddIOp::create(b, startsAt, index(1)));
    Value chunkSize = index(s.visitsPerChunk);
    Value empty =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, begin, end);
    Value firstChunk = arith::DivUIOp::create(b, begin, chunkSize);
    Value lastChunk = arith::DivUIOp::create(
        b,
        arith::SubIOp::create(b, arith::MaxUIOp::create(b, end, index(1)),
                              index(1)),
        chunkSize);
    Value spans = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                        firstChunk, lastChunk);
    Value treeChunks = arith::MulIOp::create(b, tree, p.chunks);
    auto slot = [&](Value chunk, int64_t which) {
      return arith::AddIOp::create(
          b,
          arith::MulIOp::create(b, arith::AddIOp::create(b, treeChunks, chunk),
                                index(2)),
          index(which));
    };
    // The node's sum at `partialColumn` of the partial rows, or 0 with no
    // visits.
    auto total = [&](Value partialColumn) {
      auto choice = scf::IfOp::create(b, TypeRange{b.getF32Type()}, empty,
                                      /*withElseRegion=*/true);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(choice.thenBlock());
      scf::YieldOp::create(b, ValueRange{f32(0.0)});
      b.setInsertionPointToStart(choice.elseBlock());
      Value first = memref::LoadOp::create(
          b, p.partials, ValueRange{slot(firstChunk, 1), partialColumn});
      Value sum = loop(
          arith::AddIOp::create(b, firstChunk, index(1)),
          arith::AddIOp::create(b, lastChunk, index(1)), index(1), {first},
          [&](Value chunk, ValueRange acc) {
            Value head = memref::LoadOp::create(
                b, p.partials, ValueRange{slot(chunk, 0), partialColumn});
            return SmallVector<Value>{arith::AddFOp::create(b, acc[0], head)};
          })[0];
      scf::YieldOp::create(b, ValueRange{sum});
      return choice.getResult(0);
    };
    ifThen(arith::OrIOp::create(b, empty, spans), [&] {
      auto columns = [&](Value width, Value gradient, Value firstColumn) {
        loop(threadId, width, index(s.sumThreads), {},
             [&](Value col, ValueRange) {
               Value sum = total(arith::AddIOp::create(b, firstColumn, col));
               memref::StoreOp::create(b, narrow(sum), gradient,
                                       ValueRange{blockId, col});
               return SmallVector<Value>{};
             });
      };
      columns(p.inWidth, p.gradInWeights, index(0));
      columns(p.outWidth, p.gradOutWeights, p.inWidth);
      if (!p.gradInBias)
        return;
      ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, threadId,
                                   index(0)),
             [&] {
               Value sum =
                   total(arith::AddIOp::create(b, p.inWidth, p.outWidth));
               memref::StoreOp::create(b, narrow(sum), p.gradInBias,
                                       ValueRange{blockId});
             });
    });
  }

  /// Block leaf * C + c, where C blocks of `sumThreads` cover the wider of
  /// Din and Dout: a thread per column d of the leaf's dw1 rows (w1[leaf, d]
  /// has a value per unit), and of its dw2 rows and db2, summed over the
  /// leaf's rows in row order, `unitsPerPass` units a pass; the first
  /// block's threads sum db1, a unit each.
  void leafSums(Value threadId, Value blockId) {
    int64_t width = p.hiddenWidth;
    Value threads = index(s.sumThreads);
    Value columnBlocks = arith::MaxUIOp::create(
        b,
        arith::CeilDivUIOp::create(
            b, arith::MaxUIOp::create(b, p.inWidth, p.outWidth), threads),
        index(1));
    Value leaf = arith::DivUIOp::create(b, blockId, columnBlocks);
    Value columnBlock = arith::RemUIOp::create(b, blockId, columnBlocks);
    Value col = arith::AddIOp::create(
        b, arith::MulIOp::create(b, columnBlock, threads), threadId);
    Value begin = bucketStart(leaf);
    Value end = bucketStart(arith::AddIOp::create(b, leaf, index(1)));
    auto rowAt = [&](Value m) -> Value {
      return arith::IndexCastOp::create(
          b, b.getIndexType(),
          memref::LoadOp::create(b, p.members, ValueRange{index(0), m}));
    };
    // Sums over the leaf's rows of coefficients[row, unit] * source[row, col]
    // for `count` units from `first`, and with `withPlain` also of
    // source[row, col] alone (last).
    auto unitSums = [&](Value source, Value coefficients, int64_t first,
                        int64_t count, bool withPlain) {
      SmallVector<Value> inits(count + withPlain, f32(0.0));
      return loop(begin, end, index(1), inits, [&](Value m, ValueRange acc) {
        Value row = rowAt(m);
        Value value =
            widen(memref::LoadOp::create(b, source, ValueRange{row, col}));
        SmallVector<Value> next;
        for (int64_t i = 0; i < count; ++i) {
          Value coefficient = memref::LoadOp::create(
              b, coefficients, ValueRange{row, index(first + i)});
          next.push_back(math::FmaOp::create(b, coefficient, value, acc[i]));
        }
        if (withPlain)
          next.push_back(arith::AddFOp::create(b, acc.back(), value));
        return next;
      });
    };
    auto below = [&](Value v, Value bound) {
      return arith::CmpIOp::create(b, arith::CmpIPredicate::ult, v, bound);
    };
    ifThen(below(col, p.inWidth), [&] {
      Value dw1Row = arith::AddIOp::create(
          b, arith::MulIOp::create(b, leaf, p.inWidth), col);
      for (int64_t first = 0; first < width; first += s.unitsPerPass) {
        int64_t count = std::min(s.unitsPerPass, width - first);
        SmallVector<Value> sums =
            unitSums(p.input, p.visitGrads, first, count, false);
        for (int64_t i = 0; i < count; ++i)
          memref::StoreOp::create(b, narrow(sums[i]), p.gradInWeights,
                                  ValueRange{dw1Row, index(first + i)});
      }
    });
    ifThen(below(col, p.outWidth), [&] {
      Value firstDw2Row = arith::MulIOp::create(b, leaf, index(width));
      for (int64_t first = 0; first < width; first += s.unitsPerPass) {
        int64_t count = std::min(s.unitsPerPass, width - first);
        bool withBias = first == 0;
        SmallVector<Value> sums =
            unitSums(p.gradOutput, p.visitActivations, first, count, withBias);
        for (int64_t i = 0; i < count; ++i)
          memref::StoreOp::create(
              b, narrow(sums[i]), p.gradOutWeights,
              ValueRange{
                  arith::AddIOp::create(b, firstDw2Row, index(first + i)),
                  col});
        if (withBias)
          memref::StoreOp::create(b, narrow(sums.back()), p.gradOutBias,
                                  ValueRange{leaf, col});
      }
    });
    Value firstBlock = arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                             columnBlock, index(0));
    ifThen(firstBlock, [&] {
      loop(threadId, index(width), threads, {}, [&](Value unit, ValueRange) {
        Value sum = loop(
            begin, end, index(1), {f32(0.0)}, [&](Value m, ValueRange acc) {
              Value dpre = memref::LoadOp::create(b, p.visitGrads,
                                                  ValueRange{rowAt(m), unit});
              return SmallVector<Value>{arith::AddFOp::create(b, acc[0], dpre)};
            })[0];
        memref::StoreOp::create(
            b, narrow(sum), p.gradInBias,
            ValueRange{arith::AddIOp::create(
                b, arith::MulIOp::create(b, leaf, index(width)), unit)});
        return SmallVector<Value>{};
      });
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

  /// Visit `m` of `tree`'s sorted visits: its row and its entry in the
  /// visit buffers.
  std::pair<Value, Value> visitAt(Value tree, Value m) {
    Value visit = arith::IndexCastOp::create(
        b, b.getIndexType(),
        memref::LoadOp::create(b, p.members, ValueRange{tree, m}));
    Value row = arith::DivUIOp::create(b, visit, index(levels));
    Value entry =
        arith::AddIOp::create(b, arith::MulIOp::create(b, tree, index(levels)),
                              arith::RemUIOp::create(b, visit, index(levels)));
    return {row, entry};
  }
  /// bucketStarts[at], as an index.
  Value bucketStart(Value at) {
    return arith::IndexCastOp::create(
        b, b.getIndexType(),
        memref::LoadOp::create(b, p.bucketStarts, ValueRange{at}));
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
  Value i1(bool v) { return arith::ConstantIntOp::create(b, v, 1); }
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

void fff::emitTreeGradChunkSums(ImplicitLocOpBuilder &b,
                                const TreeGradStrategy &strategy,
                                const TreeGradProblem &problem, Value threadId,
                                Value blockId) {
  TreeGradKernelEmitter(b, strategy, problem).chunkSums(threadId, blockId);
}

void fff::emitTreeGradNodeSums(ImplicitLocOpBuilder &b,
                               const TreeGradStrategy &strategy,
                               const TreeGradProblem &problem, Value threadId,
                               Value blockId) {
  TreeGradKernelEmitter(b, strategy, problem).nodeSums(threadId, blockId);
}

void fff::emitLeafTreeGradSums(ImplicitLocOpBuilder &b,
                               const TreeGradStrategy &strategy,
                               const TreeGradProblem &problem, Value threadId,
                               Value blockId) {
  TreeGradKernelEmitter(b, strategy, problem).leafSums(threadId, blockId);
}

void fff::emitTreeGradOutputBias(ImplicitLocOpBuilder &b,
                                 const TreeGradStrategy &strategy,
                                 const TreeGradProblem &problem, Value threadId,
                                 Value blockId) {
  TreeGradKernelEmitter(b, strategy, problem).outputBias(threadId, blockId);
}
