//===- Stats.cpp - Per-launch statistics, written as JSON -------*- C++ -*-===//

#include "Stats.h"

#include "Execution.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace fff::emulator {

void LaunchStats::recordGlobal(bool isStore, const uint64_t *addresses,
                               LaneMask lanes, unsigned bytes) {
  GlobalTraffic &traffic = isStore ? globalStores : globalLoads;
  ++traffic.requests;
  traffic.bytes += uint64_t(bytes) * __builtin_popcount(lanes);

  uint64_t sectors[2 * WarpSize];
  unsigned count = 0;
  forEachLane(lanes, [&](unsigned lane) {
    uint64_t first = addresses[lane] / 32;
    uint64_t last = (addresses[lane] + bytes - 1) / 32;
    for (uint64_t sector = first; sector <= last; ++sector)
      sectors[count++] = sector;
    markTouched(addresses[lane], bytes);
  });
  std::sort(sectors, sectors + count);
  traffic.sectors += std::unique(sectors, sectors + count) - sectors;
}

// Shared memory has 32 banks of 4 bytes. A request is served in phases of
// 128 bytes' worth of lanes (all 32 lanes for accesses of up to 4 bytes, 16
// for 8, 8 for 16); a phase takes as many wavefronts as the most distinct
// words any one bank must deliver (lanes reading the same word share it).
// Conflicts are the wavefronts beyond one a phase.
void LaunchStats::recordShared(bool isStore, const uint32_t *offsets,
                               LaneMask lanes, unsigned bytes) {
  ++(isStore ? sharedStores : sharedLoads);
  unsigned lanesPerPhase = bytes <= 4 ? WarpSize : 128 / bytes;
  for (unsigned first = 0; first < WarpSize; first += lanesPerPhase) {
    LaneMask phase =
        lanes & (lanesPerPhase == WarpSize
                     ? AllLanes
                     : ((LaneMask(1) << lanesPerPhase) - 1) << first);
    if (!phase)
      continue;
    uint32_t words[4 * WarpSize];
    unsigned count = 0;
    forEachLane(phase, [&](unsigned lane) {
      for (uint32_t word = offsets[lane] / 4;
           word <= (offsets[lane] + bytes - 1) / 4; ++word)
        words[count++] = word;
    });
    std::sort(words, words + count);
    count = std::unique(words, words + count) - words;
    unsigned perBank[32] = {};
    unsigned wavefronts = 0;
    for (unsigned i = 0; i < count; ++i)
      wavefronts = std::max(wavefronts, ++perBank[words[i] % 32]);
    sharedWavefronts += wavefronts;
    sharedBankConflicts += wavefronts - 1;
  }
}

void LaunchStats::markTouched(uint64_t address, unsigned bytes) {
  if (!memory.contains(address, bytes, lastAllocation))
    return;
  std::vector<uint64_t> &bits = touched[lastAllocation.base];
  if (bits.empty())
    bits.resize((lastAllocation.end - lastAllocation.base + 63) / 64);
  for (uint64_t byte = address - lastAllocation.base;
       byte < address - lastAllocation.base + bytes; ++byte)
    bits[byte / 64] |= uint64_t(1) << (byte % 64);
}

uint64_t LaunchStats::uniqueBytes() const {
  uint64_t total = 0;
  for (const auto &entry : touched)
    for (uint64_t word : entry.second)
      total += __builtin_popcountll(word);
  return total;
}

namespace {

std::string quoted(const std::string &text) {
  std::string result = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      result += '\\';
    result += c;
  }
  return result + "\"";
}

std::string array(Dim3 dims) {
  return "[" + std::to_string(dims.x) + ", " + std::to_string(dims.y) + ", " +
         std::to_string(dims.z) + "]";
}

} // namespace

std::string
LaunchStats::toJson(const std::string &kernelName, Dim3 grid, Dim3 block,
                    const std::vector<std::string> &opcodeNames) const {
  std::map<std::string, uint64_t> byOpcode; // listed by name
  for (size_t id = 0; id < opcodeCounts.size(); ++id)
    if (opcodeCounts[id])
      byOpcode[opcodeNames[id]] = opcodeCounts[id];

  std::ostringstream json;
  json << "{\"kernel\": " << quoted(kernelName) << ", \"grid\": " << array(grid)
       << ", \"block\": " << array(block)
       << ", \"warp_instructions\": " << warpInstructions
       << ", \"thread_instructions\": " << threadInstructions
       << ", \"opcodes\": {";
  const char *separator = "";
  for (const auto &[name, count] : byOpcode) {
    json << separator << quoted(name) << ": " << count;
    separator = ", ";
  }
  uint64_t requests = globalLoads.requests + globalStores.requests;
  uint64_t sectors = globalLoads.sectors + globalStores.sectors;
  json << "}, \"global_load_requests\": " << globalLoads.requests
       << ", \"global_store_requests\": " << globalStores.requests
       << ", \"global_load_bytes\": " << globalLoads.bytes
       << ", \"global_store_bytes\": " << globalStores.bytes
       << ", \"global_load_sectors\": " << globalLoads.sectors
       << ", \"global_store_sectors\": " << globalStores.sectors
       << ", \"sectors_per_request\": "
       << (requests ? double(sectors) / double(requests) : 0.0)
       << ", \"global_unique_bytes\": " << uniqueBytes()
       << ", \"shared_load_requests\": " << sharedLoads
       << ", \"shared_store_requests\": " << sharedStores
       << ", \"shared_wavefronts\": " << sharedWavefronts
       << ", \"shared_bank_conflicts\": " << sharedBankConflicts
       << ", \"branches\": " << branches
       << ", \"divergent_branches\": " << divergentBranches << "}";
  return json.str();
}

bool appendStatsLine(const std::string &path, const std::string &json) {
  FILE *file = std::fopen(path.c_str(), "a");
  if (!file)
    return false;
  bool written = std::fprintf(file, "%s\n", json.c_str()) >= 0;
  return std::fclose(file) == 0 && written;
}

} // namespace fff::emulator
