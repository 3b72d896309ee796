//===- RowLoops.cpp - loops over independent rows, threaded when large -*- C++
//-*-===//

#include "fff/Conversion/RowLoops.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using fff::BuildInside;

void fff::buildRowLoop(ImplicitLocOpBuilder &b, Value rows, Value work,
                       int64_t minParallelWork, DictionaryAttr strategy,
                       function_ref<void(Value row)> body) {
  Value zero = arith::ConstantIndexOp::create(b, 0);
  Value one = arith::ConstantIndexOp::create(b, 1);
  Value large =
      arith::CmpIOp::create(b, arith::CmpIPredicate::uge, work,
                            arith::ConstantIndexOp::create(b, minParallelWork));
  scf::IfOp::create(
      b, large,
      [&](OpBuilder &nested, Location) {
        BuildInside inside(b, nested);
        auto loop = scf::ParallelOp::create(
            b, ValueRange{zero}, ValueRange{rows}, ValueRange{one},
            [&](OpBuilder &inner, Location, ValueRange ivs) {
              BuildInside inLoop(b, inner);
              body(ivs[0]);
            });
        if (strategy)
          loop->setAttr("fff.strategy", strategy);
        scf::YieldOp::create(b);
      },
      [&](OpBuilder &nested, Location) {
        BuildInside inside(b, nested);
        scf::ForOp::create(
            b, zero, rows, one, ValueRange{},
            [&](OpBuilder &inner, Location, Value row, ValueRange) {
              BuildInside inLoop(b, inner);
              body(row);
              scf::YieldOp::create(b);
            });
        scf::YieldOp::create(b);
      });
}
