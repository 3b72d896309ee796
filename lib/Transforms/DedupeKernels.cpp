//===- DedupeKernels.cpp - one kernel per distinct piece of work ----------===//
//
// The kernel lowerings emit a kernel per op; a model repeats its layers, so
// most of those kernels are copies. Copies are found by what they are (a
// hash of the kernel's attributes and body, confirmed by a structural
// comparison), not by name: the lowerings already give different kernels
// different names, but the same name may also be two copies.
//
//===----------------------------------------------------------------------===//

#include "fff/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"

namespace fff {
#define GEN_PASS_DEF_DEDUPEKERNELS
#include "fff/Transforms/Passes.h.inc"
} // namespace fff

using namespace mlir;
using namespace fff;

namespace {

/// A kernel's attributes but its name: its type, strategy, launch bounds.
SmallVector<NamedAttribute> attributesButName(gpu::GPUFuncOp kernel) {
  SmallVector<NamedAttribute> attributes;
  for (NamedAttribute attribute : kernel->getAttrs())
    if (attribute.getName() != SymbolTable::getSymbolAttrName())
      attributes.push_back(attribute);
  return attributes;
}

/// A hash of everything that makes a kernel what it is; equal for copies.
llvm::hash_code kernelHash(gpu::GPUFuncOp kernel) {
  llvm::hash_code hash = llvm::hash_combine_range(attributesButName(kernel));
  kernel.getBody().walk([&](Operation *op) {
    hash =
        llvm::hash_combine(hash, OperationEquivalence::computeHash(
                                     op, OperationEquivalence::ignoreHashValue,
                                     OperationEquivalence::ignoreHashValue,
                                     OperationEquivalence::IgnoreLocations));
  });
  return hash;
}

bool sameKernel(gpu::GPUFuncOp a, gpu::GPUFuncOp b) {
  return attributesButName(a) == attributesButName(b) &&
         OperationEquivalence::isRegionEquivalentTo(
             &a.getBody(), &b.getBody(), OperationEquivalence::IgnoreLocations);
}

struct DedupeKernelsPass : fff::impl::DedupeKernelsBase<DedupeKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // @kernels::@copy -> @kernels::@original, for every copy.
    DenseMap<SymbolRefAttr, SymbolRefAttr> originals;
    SmallVector<gpu::GPUFuncOp> copies;
    for (auto kernels : module.getOps<gpu::GPUModuleOp>()) {
      // Kernels seen so far, by hash; the first of each kind stays.
      DenseMap<llvm::hash_code, SmallVector<gpu::GPUFuncOp, 1>> seen;
      for (auto kernel : kernels.getOps<gpu::GPUFuncOp>()) {
        SmallVector<gpu::GPUFuncOp, 1> &candidates = seen[kernelHash(kernel)];
        auto original = llvm::find_if(candidates, [&](gpu::GPUFuncOp other) {
          return sameKernel(kernel, other);
        });
        if (original == candidates.end()) {
          candidates.push_back(kernel);
          continue;
        }
        auto reference = [&](gpu::GPUFuncOp function) {
          return SymbolRefAttr::get(kernels.getNameAttr(),
                                    FlatSymbolRefAttr::get(function));
        };
        originals[reference(kernel)] = reference(*original);
        copies.push_back(kernel);
      }
    }
    if (copies.empty())
      return;
    // One walk over the module repoints every reference (launches, and
    // anything else that names a kernel).
    AttrTypeReplacer replacer;
    replacer.addReplacement(
        [&](SymbolRefAttr reference) -> std::optional<Attribute> {
          auto original = originals.find(reference);
          if (original == originals.end())
            return std::nullopt;
          return original->second;
        });
    replacer.recursivelyReplaceElementsIn(module, /*replaceAttrs=*/true,
                                          /*replaceLocs=*/false,
                                          /*replaceTypes=*/false);
    for (gpu::GPUFuncOp copy : copies)
      copy.erase();
  }
};

} // namespace
