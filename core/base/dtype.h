// The element types ddphooks reduces, and their DLPack encodings.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>

namespace ddph {

enum class DType : uint8_t { F32, F64, F16, BF16, I32, I64, U8 };

// False when dl is not one of the types above (or has lanes != 1).
bool dtype_from_dl(DLDataType dl, DType* out);
DLDataType dtype_to_dl(DType t);
size_t dtype_size(DType t);
const char* dtype_name(DType t);
// "float32", "int8x4", ... for any DLDataType, for error messages.
const char* dl_dtype_text(DLDataType dl, char (&buf)[32]);

}  // namespace ddph
