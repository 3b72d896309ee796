//===- Reconvergence.cpp - Where diverged lanes meet again ------*- C++ -*-===//
//
// Post-dominators by the iterative algorithm of Cooper, Harvey and Kennedy
// ("A Simple, Fast Dominance Algorithm"), run on the reversed control-flow
// graph of basic blocks, with one virtual exit node that every ret and exit
// leads to.
//
//===----------------------------------------------------------------------===//

#include "Reconvergence.h"

#include <vector>

namespace fff::emulator {
namespace {

constexpr unsigned Undefined = UINT32_MAX;

struct BasicBlock {
  uint32_t start = 0;
  std::vector<unsigned> successors; // block indices; the exit node last
};

class PostDominators {
public:
  explicit PostDominators(const Kernel &kernel) { buildBlocks(kernel); }

  /// The first instruction of each block's immediate post-dominator, or
  /// NoReconvergence when that is the exit.
  std::vector<uint32_t> immediatePostDominatorStarts();

  unsigned blockOf(uint32_t instruction) const {
    return blockIndex[instruction];
  }

private:
  void buildBlocks(const Kernel &kernel);
  void numberFromExit();
  unsigned intersect(unsigned a, unsigned b) const;

  std::vector<BasicBlock> blocks; // the exit node is blocks.back()
  std::vector<unsigned> blockIndex;
  std::vector<std::vector<unsigned>> predecessors;
  std::vector<unsigned> postorder;     // of the reversed graph, from exit
  std::vector<unsigned> postorderRank; // Undefined: cannot reach the exit
  std::vector<unsigned> dominator;
};

void PostDominators::buildBlocks(const Kernel &kernel) {
  const std::vector<Instruction> &code = kernel.code;
  std::vector<bool> leader(code.size(), false);
  leader[0] = true;
  for (uint32_t i = 0; i < code.size(); ++i) {
    const Instruction &instruction = code[i];
    if (instruction.flow == ControlFlow::Branch)
      leader[instruction.target] = true;
    if ((instruction.flow == ControlFlow::Branch ||
         instruction.flow == ControlFlow::Exit) &&
        i + 1 < code.size())
      leader[i + 1] = true;
  }
  blockIndex.resize(code.size());
  for (uint32_t i = 0; i < code.size(); ++i) {
    if (leader[i]) {
      blocks.emplace_back();
      blocks.back().start = i;
    }
    blockIndex[i] = unsigned(blocks.size() - 1);
  }
  unsigned exit = unsigned(blocks.size());
  for (unsigned block = 0; block < blocks.size(); ++block) {
    uint32_t end = block + 1 < blocks.size() ? blocks[block + 1].start
                                             : uint32_t(code.size());
    const Instruction &last = code[end - 1];
    std::vector<unsigned> &successors = blocks[block].successors;
    bool conditional = last.guard != NoRegister;
    if (last.flow == ControlFlow::Branch)
      successors.push_back(blockIndex[last.target]);
    if (last.flow == ControlFlow::Exit)
      successors.push_back(exit);
    bool fallsThrough =
        (last.flow != ControlFlow::Branch && last.flow != ControlFlow::Exit) ||
        conditional;
    if (fallsThrough && end < code.size())
      successors.push_back(blockIndex[end]);
  }
  blocks.emplace_back(); // the exit node
  predecessors.resize(blocks.size());
  for (unsigned block = 0; block < blocks.size(); ++block)
    for (unsigned successor : blocks[block].successors)
      predecessors[successor].push_back(block);
}

/// Depth-first from the exit along reversed edges.
void PostDominators::numberFromExit() {
  postorderRank.assign(blocks.size(), Undefined);
  std::vector<bool> visited(blocks.size(), false);
  std::vector<std::pair<unsigned, size_t>> stack{
      {unsigned(blocks.size() - 1), 0}};
  visited.back() = true;
  while (!stack.empty()) {
    auto &[block, next] = stack.back();
    if (next < predecessors[block].size()) {
      unsigned predecessor = predecessors[block][next++];
      if (!visited[predecessor]) {
        visited[predecessor] = true;
        stack.push_back({predecessor, 0});
      }
      continue;
    }
    postorderRank[block] = unsigned(postorder.size());
    postorder.push_back(block);
    stack.pop_back();
  }
}

unsigned PostDominators::intersect(unsigned a, unsigned b) const {
  while (a != b) {
    while (postorderRank[a] < postorderRank[b])
      a = dominator[a];
    while (postorderRank[b] < postorderRank[a])
      b = dominator[b];
  }
  return a;
}

std::vector<uint32_t> PostDominators::immediatePostDominatorStarts() {
  numberFromExit();
  unsigned exit = unsigned(blocks.size() - 1);
  dominator.assign(blocks.size(), Undefined);
  dominator[exit] = exit;
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = postorder.rbegin(); it != postorder.rend(); ++it) {
      unsigned block = *it;
      if (block == exit)
        continue;
      unsigned candidate = Undefined;
      for (unsigned successor : blocks[block].successors) {
        if (dominator[successor] == Undefined)
          continue;
        candidate = candidate == Undefined ? successor
                                           : intersect(successor, candidate);
      }
      if (candidate != dominator[block]) {
        dominator[block] = candidate;
        changed = true;
      }
    }
  }
  std::vector<uint32_t> starts(blocks.size() - 1, NoReconvergence);
  for (unsigned block = 0; block + 1 < blocks.size(); ++block) {
    unsigned postDominator = dominator[block];
    if (postDominator != Undefined && postDominator != exit)
      starts[block] = blocks[postDominator].start;
  }
  return starts;
}

} // namespace

void computeReconvergencePoints(Kernel &kernel) {
  PostDominators postDominators(kernel);
  std::vector<uint32_t> starts = postDominators.immediatePostDominatorStarts();
  for (uint32_t i = 0; i < kernel.code.size(); ++i) {
    Instruction &instruction = kernel.code[i];
    if (instruction.flow == ControlFlow::Branch &&
        instruction.guard != NoRegister)
      instruction.reconvergence = starts[postDominators.blockOf(i)];
  }
}

} // namespace fff::emulator
