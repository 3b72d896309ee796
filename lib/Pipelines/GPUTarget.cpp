//===- GPUTarget.cpp - the NVPTX chip and PTX version to compile for ------===//

#include "fff/Pipelines/GPUTarget.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Triple.h"

#include <memory>
#include <optional>

using namespace llvm;

namespace {

constexpr char kTriple[] = "nvptx64-nvidia-cuda";
/// The kernels' PTX needs 8.0 on sm_90; older chips accept it too.
constexpr unsigned kDefaultPTXVersion = 80;
/// The oldest chip fff compiles for: the oldest the CUDA 13 ptxas accepts,
/// against which the kernels are checked.
constexpr unsigned kOldestSM = 75;

Error failure(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

/// The SM number and suffix ("", "a" or "f") of a chip name: sm_90a -> 90, a.
std::optional<std::pair<unsigned, StringRef>> parseChip(StringRef chip) {
  unsigned number;
  if (!chip.consume_front("sm_"))
    return std::nullopt;
  StringRef digits = chip.take_while(llvm::isDigit);
  if (digits.getAsInteger(10, number))
    return std::nullopt;
  return std::make_pair(number, chip.drop_front(digits.size()));
}

/// The oldest PTX ISA version that knows `sm`/`suffix` (times ten), from
/// the release history in NVIDIA's PTX ISA manual. LLVM aborts when asked
/// for an older one, so it is checked here first.
unsigned minimumPTXVersion(unsigned sm, StringRef suffix) {
  switch (sm) {
  case 75:
    return 63;
  case 80:
    return 70;
  case 86:
    return 71;
  case 87:
    return 74;
  case 88:
    return 90;
  case 89:
    return 78;
  case 90:
    return suffix.empty() ? 78 : 80;
  case 100:
  case 101:
    return suffix == "f" ? 88 : 86;
  case 103:
    return 88;
  case 110:
    return 90;
  case 120:
    return suffix == "f" ? 88 : 87;
  case 121:
    return 88;
  }
  // A chip LLVM knows and this table does not: a newer one.
  return 90;
}

/// The version NN of a `ptxNN` feature name.
std::optional<unsigned> ptxVersionOf(StringRef feature) {
  unsigned version;
  if (!feature.consume_front("ptx") || feature.getAsInteger(10, version))
    return std::nullopt;
  return version;
}

std::string formatPTX(unsigned version) {
  return std::to_string(version / 10) + "." + std::to_string(version % 10);
}

} // namespace

Expected<fff::GPUTarget> fff::resolveGPUTarget(StringRef chip,
                                               StringRef features) {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTargetMC();
  std::string error;
  Triple triple(kTriple);
  const Target *nvptx = TargetRegistry::lookupTarget(triple, error);
  if (!nvptx)
    return failure("LLVM was built without the NVPTX backend: " + error);
  // Asked for an unknown chip, LLVM would warn on stderr; ask the generic
  // subtarget first.
  std::unique_ptr<MCSubtargetInfo> generic(
      nvptx->createMCSubtargetInfo(triple, "", ""));
  if (!generic || !generic->isCPUStringValid(chip))
    return failure("unknown GPU chip '" + chip +
                   "': LLVM's NVPTX backend knows sm_XX names such as sm_80, "
                   "sm_90 or sm_90a");
  std::optional<std::pair<unsigned, StringRef>> sm = parseChip(chip);
  if (!sm || sm->first < kOldestSM)
    return failure("GPU chip '" + chip + "' is older than sm_" +
                   Twine(kOldestSM) + ", the oldest fff compiles for");
  unsigned minimumPTX = minimumPTXVersion(sm->first, sm->second);

  std::optional<unsigned> requestedPTX;
  SmallVector<StringRef> specs;
  features.split(specs, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (StringRef spec : specs) {
    spec = spec.trim();
    StringRef name = spec.drop_front();
    bool known = (spec.starts_with("+") || spec.starts_with("-")) &&
                 llvm::any_of(generic->getAllProcessorFeatures(),
                              [&](const SubtargetFeatureKV &feature) {
                                return name == feature.Key;
                              });
    if (!known)
      return failure("unknown NVPTX feature '" + spec +
                     "': expected +name, such as +ptx80");
    if (std::optional<unsigned> version = ptxVersionOf(name))
      if (spec.starts_with("+"))
        requestedPTX = version;
  }
  if (requestedPTX && *requestedPTX < minimumPTX)
    return failure("features '" + features + "' select PTX " +
                   formatPTX(*requestedPTX) + ", but " + chip + " needs PTX " +
                   formatPTX(minimumPTX) + " or newer");

  GPUTarget target{chip.str(), features.str()};
  if (!requestedPTX) {
    std::string version =
        "+ptx" + std::to_string(std::max(kDefaultPTXVersion, minimumPTX));
    target.features =
        target.features.empty() ? version : target.features + "," + version;
  }
  return target;
}
