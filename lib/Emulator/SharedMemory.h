//===- SharedMemory.h - A block's shared memory and shadow ------*- C++ -*-===//
//
// Shared memory with, for each byte, who wrote and read it last and in which
// barrier interval: enough to find reads of bytes the block never wrote and
// races, i.e. two accesses to the same byte by threads of different warps
// between the same two barriers, at least one of them a write. Threads of
// one warp are not checked against each other: the interpreter runs a
// warp's lanes in lockstep.
//
// Intervals are numbered across the whole launch (a new block starts a new
// one, and so does each completed barrier), so nothing is cleared between
// blocks: a byte last written before the current block began is
// uninitialized.
//
//===----------------------------------------------------------------------===//

#ifndef FFF_EMULATOR_SHAREDMEMORY_H
#define FFF_EMULATOR_SHAREDMEMORY_H

#include <cstdint>
#include <vector>

namespace fff::emulator {

/// What is wrong with a shared-memory access, if anything.
struct SharedAccessProblem {
  enum Kind : uint8_t {
    None,
    Uninitialized,  // a read of a byte the block has not written
    RaceAfterWrite, // the byte was written by another warp in this interval
    RaceAfterRead,  // a write of a byte another warp read in this interval
  };
  Kind kind = None;
  uint32_t offset = 0;      // the first byte concerned
  uint16_t otherThread = 0; // the other access's thread, linear in the block
};

class SharedMemory {
public:
  /// Sizes the memory for a launch and forgets every earlier access.
  void reset(unsigned bytes);
  /// A new block: all bytes are uninitialized again.
  void beginBlock() { blockStart = ++interval; }
  /// A barrier completed: later accesses no longer race with earlier ones.
  void completeBarrier() { ++interval; }

  unsigned size() const { return unsigned(data.size()); }
  uint8_t *bytes() { return data.data(); }

  /// Check and record an access of [offset, offset + bytes), which must lie
  /// within size(), by `thread` (linear in the block).
  SharedAccessProblem recordRead(uint32_t offset, unsigned bytes,
                                 uint16_t thread);
  SharedAccessProblem recordWrite(uint32_t offset, unsigned bytes,
                                  uint16_t thread);

private:
  struct ByteShadow {
    uint32_t writeInterval = 0;
    uint32_t readInterval = 0;
    uint16_t writer = 0;
    uint16_t reader = 0;
    /// A reader of this interval from another warp than `reader`'s, or
    /// NoThread.
    uint16_t otherWarpReader = 0;
  };
  static constexpr uint16_t NoThread = UINT16_MAX;

  std::vector<uint8_t> data;
  std::vector<ByteShadow> shadow;
  uint32_t interval = 0;
  uint32_t blockStart = 0;
};

} // namespace fff::emulator

#endif // FFF_EMULATOR_SHAREDMEMORY_H
