//===- KernelBuilder.cpp - A kernel's names while it is decoded -*- C++ -*-===//

#include "KernelBuilder.h"

#include "Reconvergence.h"

namespace fff::emulator {
namespace {

uint64_t alignTo(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

} // namespace

KernelBuilder::KernelBuilder(Kernel &kernel, Module &module,
                             const SymbolTable &moduleSymbols,
                             unsigned moduleSharedBytes)
    : kernel(kernel), module(module), moduleSymbols(moduleSymbols) {
  kernel.staticSharedBytes = moduleSharedBytes;
}

RegisterIndex KernelBuilder::allocateRegister() {
  if (nextRegister >= NoRegister) {
    tooManyRegisters = "kernel '" + kernel.name + "' needs more than " +
                       std::to_string(NoRegister) + " registers";
    return 0;
  }
  return RegisterIndex(nextRegister++);
}

std::string KernelBuilder::declareRegisters(std::string_view prefix,
                                            unsigned count, ScalarType type) {
  for (unsigned i = 0; i < count; ++i) {
    std::string error =
        declareRegister(std::string(prefix) + std::to_string(i), type);
    if (!error.empty())
      return error;
  }
  return "";
}

std::string KernelBuilder::declareRegister(std::string_view name,
                                           ScalarType type) {
  RegisterIndex index = allocateRegister();
  if (!tooManyRegisters.empty())
    return tooManyRegisters;
  if (!registers.emplace(std::string(name), RegisterInfo{index, type}).second)
    return "register " + std::string(name) + " is declared twice";
  return "";
}

std::string KernelBuilder::declareShared(std::string_view name, uint64_t bytes,
                                         unsigned alignment) {
  uint64_t offset = alignTo(kernel.staticSharedBytes, alignment);
  if (!kernelSymbols
           .emplace(std::string(name),
                    SymbolAddress{StateSpace::Shared, offset, bytes})
           .second)
    return "symbol " + std::string(name) + " is declared twice";
  kernel.staticSharedBytes = unsigned(offset + bytes);
  return "";
}

std::string KernelBuilder::declareParameter(std::string_view name,
                                            unsigned bytes,
                                            unsigned alignment) {
  unsigned offset = unsigned(alignTo(kernel.parameterBytes, alignment));
  if (!kernelSymbols
           .emplace(std::string(name),
                    SymbolAddress{StateSpace::Param, offset, bytes})
           .second)
    return "parameter " + std::string(name) + " is declared twice";
  kernel.parameters.push_back({std::string(name), offset, bytes});
  kernel.parameterBytes = offset + bytes;
  return "";
}

const RegisterInfo *KernelBuilder::findRegister(std::string_view name) const {
  auto it = registers.find(std::string(name));
  return it == registers.end() ? nullptr : &it->second;
}

const SymbolAddress *KernelBuilder::findSymbol(std::string_view name) const {
  auto it = kernelSymbols.find(name);
  if (it != kernelSymbols.end())
    return &it->second;
  it = moduleSymbols.find(name);
  return it == moduleSymbols.end() ? nullptr : &it->second;
}

const KernelParameter *
KernelBuilder::findParameter(std::string_view name) const {
  for (const KernelParameter &parameter : kernel.parameters)
    if (parameter.name == name)
      return &parameter;
  return nullptr;
}

RegisterIndex KernelBuilder::specialRegister(SpecialRegister which) {
  auto it = specials.find(which);
  if (it != specials.end())
    return it->second;
  RegisterIndex index = allocateRegister();
  specials.emplace(which, index);
  kernel.specialRegisters.push_back({index, which});
  return index;
}

RegisterIndex KernelBuilder::constant(uint64_t value) {
  auto it = constants.find(value);
  if (it != constants.end())
    return it->second;
  RegisterIndex index = allocateRegister();
  constants.emplace(value, index);
  kernel.constants.push_back({index, value});
  return index;
}

void KernelBuilder::defineLabel(std::string_view name, unsigned line) {
  if (!labels.emplace(std::string(name), uint32_t(kernel.code.size())).second &&
      duplicateLabel.empty())
    duplicateLabel = "line " + std::to_string(line) + ": label " +
                     std::string(name) + " is defined twice";
}

void KernelBuilder::useLabel(std::string_view label, unsigned line) {
  labelUses.push_back({std::string(label), uint32_t(kernel.code.size()), line});
}

uint16_t KernelBuilder::opcodeId(std::string_view mnemonic) {
  std::vector<std::string> &names = module.opcodeNames;
  for (size_t id = 0; id < names.size(); ++id)
    if (names[id] == mnemonic)
      return uint16_t(id);
  names.emplace_back(mnemonic);
  return uint16_t(names.size() - 1);
}

std::string KernelBuilder::finish() {
  if (!duplicateLabel.empty())
    return duplicateLabel;
  for (const LabelUse &use : labelUses) {
    auto it = labels.find(use.label);
    if (it == labels.end())
      return "line " + std::to_string(use.line) + ": undefined label " +
             use.label;
    kernel.code[use.index].target = it->second;
  }
  // Running past the last instruction (or branching to a label after it)
  // ends the thread, as reaching the kernel's closing brace does.
  uint32_t end = uint32_t(kernel.code.size());
  bool endsInExit = end && kernel.code.back().flow == ControlFlow::Exit &&
                    kernel.code.back().guard == NoRegister;
  bool labelAtEnd = false;
  for (const auto &label : labels)
    labelAtEnd |= label.second == end;
  if (!endsInExit || labelAtEnd) {
    Instruction exit;
    exit.flow = ControlFlow::Exit;
    exit.opcodeId = opcodeId("ret");
    exit.line = end ? kernel.code.back().line : 0;
    kernel.code.push_back(exit);
  }
  computeReconvergencePoints(kernel);
  kernel.numRegisters = nextRegister;
  return tooManyRegisters;
}

} // namespace fff::emulator
