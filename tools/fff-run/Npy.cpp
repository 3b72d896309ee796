//===- Npy.cpp - reading and writing NumPy .npy files -----------*- C++ -*-===//

#include "Npy.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <functional>
#include <numeric>

using namespace llvm;

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

Error malformed(StringRef path, const Twine &why) {
  return createStringError(inconvertibleErrorCode(),
                           "'" + path + "' is not a valid .npy file: " + why);
}

/// Finds `'key': value` in the header dictionary and returns the value text,
/// up to the next top-level comma or closing brace.
std::optional<StringRef> headerValue(StringRef header, StringRef key) {
  std::string quoted = ("'" + key + "'").str();
  size_t at = header.find(quoted);
  if (at == StringRef::npos)
    return std::nullopt;
  StringRef rest = header.drop_front(at + quoted.size()).ltrim();
  if (!rest.consume_front(":"))
    return std::nullopt;
  rest = rest.ltrim();
  size_t end = rest.starts_with("(") ? rest.find(')') + 1 : rest.find_first_of(",}");
  if (end == StringRef::npos || end == 0)
    return std::nullopt;
  return rest.take_front(end).trim();
}

/// Bytes per element of a dtype string such as "f4"; 0 when unsupported.
size_t dtypeSize(StringRef dtype) {
  if (dtype.size() < 2 || !StringRef("fiub").contains(dtype[0]))
    return 0;
  unsigned size;
  if (dtype.drop_front().getAsInteger(10, size) ||
      !is_contained({1u, 2u, 4u, 8u}, size) || (dtype[0] == 'f' && size == 1))
    return 0;
  return size;
}

} // namespace

int64_t fff::NpyArray::numElements() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1),
                         std::multiplies<int64_t>());
}

Expected<fff::NpyArray> fff::readNpy(StringRef path) {
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/false,
                                      /*RequiresNullTerminator=*/false);
  if (!buffer)
    return createStringError(buffer.getError(),
                             "cannot read '" + path +
                                 "': " + buffer.getError().message());
  StringRef bytes = (*buffer)->getBuffer();
  if (bytes.size() < kMagicSize + 4 || !bytes.starts_with(StringRef(kMagic, kMagicSize)))
    return malformed(path, "missing the \\x93NUMPY magic");

  unsigned major = static_cast<unsigned char>(bytes[kMagicSize]);
  size_t headerLength, headerStart;
  auto byteAt = [&](size_t i) { return size_t(static_cast<unsigned char>(bytes[i])); };
  if (major == 1) {
    headerLength = byteAt(8) | byteAt(9) << 8;
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return malformed(path, "truncated header");
    headerLength = byteAt(8) | byteAt(9) << 8 | byteAt(10) << 16 | byteAt(11) << 24;
    headerStart = 12;
  } else {
    return malformed(path, "unsupported format version " + Twine(major));
  }
  if (bytes.size() < headerStart + headerLength)
    return malformed(path, "truncated header");
  StringRef header = bytes.substr(headerStart, headerLength);

  std::optional<StringRef> descr = headerValue(header, "descr");
  std::optional<StringRef> order = headerValue(header, "fortran_order");
  std::optional<StringRef> shapeText = headerValue(header, "shape");
  if (!descr || !order || !shapeText)
    return malformed(path, "header lacks descr, fortran_order or shape");
  if (*order != "False")
    return createStringError(inconvertibleErrorCode(),
                             "'" + path + "' is in Fortran order; save a C-order array (np.ascontiguousarray)");

  StringRef dtype = descr->trim("'\"");
  if (dtype.consume_front(">"))
    return createStringError(inconvertibleErrorCode(),
                             "'" + path + "' is big-endian; save it little-endian");
  dtype.consume_front("<") || dtype.consume_front("|") || dtype.consume_front("=");
  if (!dtypeSize(dtype))
    return createStringError(inconvertibleErrorCode(),
                             "'" + path + "' has unsupported dtype '" + *descr + "'");

  NpyArray array;
  array.dtype = dtype.str();
  SmallVector<StringRef> dims;
  shapeText->trim("()").split(dims, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (StringRef dim : dims) {
    int64_t extent;
    if (dim.trim().getAsInteger(10, extent) || extent < 0)
      return malformed(path, "bad shape " + *shapeText);
    array.shape.push_back(extent);
  }

  // The header's shape is untrusted: its product must not overflow before
  // it is compared with the data that is really there.
  int64_t dataSize = dtypeSize(dtype);
  for (int64_t extent : array.shape)
    if (MulOverflow(dataSize, extent, dataSize))
      return malformed(path, "shape " + *shapeText + " is too large");
  StringRef data = bytes.drop_front(headerStart + headerLength);
  if (int64_t(data.size()) != dataSize)
    return malformed(path, "expected " + Twine(dataSize) + " data bytes for shape " +
                               *shapeText + ", found " + Twine(data.size()));
  array.data.assign(data.begin(), data.end());
  return array;
}

Error fff::writeNpy(StringRef path, const NpyArray &array) {
  std::string shape = "(";
  for (int64_t extent : array.shape)
    shape += std::to_string(extent) + ", ";
  if (array.shape.size() > 1)
    shape.resize(shape.size() - 2);
  else if (array.shape.size() == 1)
    shape.resize(shape.size() - 1); // keep the trailing comma: (n,)
  shape += ")";
  char byteOrder = array.dtype.back() == '1' ? '|' : '<';
  std::string header = "{'descr': '" + std::string(1, byteOrder) + array.dtype +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces so that the data starts 64-byte aligned; end with \n.
  size_t unpadded = kMagicSize + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';

  std::error_code error;
  raw_fd_ostream os(path, error, sys::fs::OF_None);
  if (error)
    return createStringError(error, "cannot write '" + path + "': " + error.message());
  os.write(kMagic, kMagicSize);
  os << char(1) << char(0) << char(header.size() & 0xff)
     << char((header.size() >> 8) & 0xff) << header;
  os.write(array.data.data(), array.data.size());
  os.close();
  if (os.has_error())
    return createStringError(os.error(), "cannot write '" + path + "': " + os.error().message());
  return Error::success();
}
