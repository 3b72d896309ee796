//===- BlockParallelLoops.cpp - one block of iterations per thread --------===//

#include "fff/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Async/IR/Async.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace fff {
#define GEN_PASS_DEF_BLOCKPARALLELLOOPS
#include "fff/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;

namespace {

/// Replaces `loop` (one dimension, no reductions) by a parallel loop over
/// `threads` blocks (0: the async runtime's workers) of its iterations.
void blockLoop(scf::ParallelOp loop, int64_t threads) {
  ImplicitLocOpBuilder b(loop.getLoc(), loop);
  Value lower = loop.getLowerBound()[0], upper = loop.getUpperBound()[0];
  Value step = loop.getStep()[0];
  Value zero = arith::ConstantIndexOp::create(b, 0);
  Value one = arith::ConstantIndexOp::create(b, 1);
  // An empty range has no iterations (upper may lie below lower).
  Value span = arith::MaxSIOp::create(
      b, arith::SubIOp::create(b, upper, lower), zero);
  Value iterations = arith::CeilDivUIOp::create(b, span, step);
  Value workers =
      threads > 0
          ? arith::ConstantIndexOp::create(b, threads).getResult()
          : async::RuntimeNumWorkerThreadsOp::create(b).getResult();
  Value blocks = arith::MinUIOp::create(b, iterations, workers);
  Value blockSize = arith::CeilDivUIOp::create(
      b, iterations, arith::MaxUIOp::create(b, blocks, one));

  auto blocked = scf::ParallelOp::create(
      b, ValueRange{zero}, ValueRange{blocks}, ValueRange{one},
      [&](OpBuilder &nested, Location location, ValueRange ivs) {
        ImplicitLocOpBuilder inner(location, nested);
        Value first = arith::MulIOp::create(inner, ivs[0], blockSize);
        Value end = arith::MinUIOp::create(
            inner, arith::AddIOp::create(inner, first, blockSize), iterations);
        auto toIndex = [&](Value iteration) -> Value {
          return arith::AddIOp::create(
              inner, lower, arith::MulIOp::create(inner, iteration, step));
        };
        auto serial = scf::ForOp::create(inner, toIndex(first), toIndex(end),
                                         step);
        // The original body, its induction variable now the serial loop's.
        Block *body = serial.getBody();
        body->getOperations().splice(
            body->begin(), loop.getBody()->getOperations(),
            loop.getBody()->begin(), std::prev(loop.getBody()->end()));
        loop.getInductionVars()[0].replaceAllUsesWith(
            serial.getInductionVar());
        scf::ReduceOp::create(inner);
      });
  blocked->setDiscardableAttrs(loop->getDiscardableAttrDictionary());
  loop.erase();
}

struct BlockParallelLoopsPass
    : fff::impl::BlockParallelLoopsBase<BlockParallelLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (threads < 0) {
      getOperation()->emitError()
          << "threads must be 0 (the runtime's workers) or positive, not "
          << int64_t(threads);
      return signalPassFailure();
    }
    SmallVector<scf::ParallelOp> loops;
    getOperation()->walk([&](scf::ParallelOp loop) {
      if (loop.getNumLoops() == 1 && loop.getNumReductions() == 0)
        loops.push_back(loop);
    });
    for (scf::ParallelOp loop : loops)
      blockLoop(loop, threads);
  }
};

} // namespace
