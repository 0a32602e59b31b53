// raw_dtype.hpp - the element types the foreign checkpoint readers (tf_bundle.hpp, pt_archive.hpp) report, and
// their sizes: one list for both, mapped to ATen types in one place (interop.cpp). No LibTorch.
#pragma once
#include <cstddef>

namespace bertx {

enum class RawDType { Float, Double, Half, BFloat16, Int64, Int32, Int16, Int8, UInt8, Bool, Other };

// Bytes per element (0 for Other).
inline std::size_t raw_dtype_size(RawDType t) {
  switch (t) {
    case RawDType::Double:
    case RawDType::Int64:
      return 8;
    case RawDType::Float:
    case RawDType::Int32:
      return 4;
    case RawDType::Half:
    case RawDType::BFloat16:
    case RawDType::Int16:
      return 2;
    case RawDType::Int8:
    case RawDType::UInt8:
    case RawDType::Bool:
      return 1;
    case RawDType::Other:
      return 0;
  }
  return 0;
}

}  // namespace bertx
