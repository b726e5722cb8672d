#include "core/base/dtype.h"

#include <cstdio>

namespace ddph {

bool dtype_from_dl(DLDataType dl, DType* out) {
  if (dl.lanes != 1) return false;
  DType t;
  if (dl.code == kDLFloat && dl.bits == 32) t = DType::F32;
  else if (dl.code == kDLFloat && dl.bits == 64) t = DType::F64;
  else if (dl.code == kDLFloat && dl.bits == 16) t = DType::F16;
  else if (dl.code == kDLBfloat && dl.bits == 16) t = DType::BF16;
  else if (dl.code == kDLInt && dl.bits == 32) t = DType::I32;
  else if (dl.code == kDLInt && dl.bits == 64) t = DType::I64;
  else if (dl.code == kDLUInt && dl.bits == 8) t = DType::U8;
  else return false;
  *out = t;
  return true;
}

DLDataType dtype_to_dl(DType t) {
  switch (t) {
    case DType::F32: return {kDLFloat, 32, 1};
    case DType::F64: return {kDLFloat, 64, 1};
    case DType::F16: return {kDLFloat, 16, 1};
    case DType::BF16: return {kDLBfloat, 16, 1};
    case DType::I32: return {kDLInt, 32, 1};
    case DType::I64: return {kDLInt, 64, 1};
    case DType::U8: return {kDLUInt, 8, 1};
  }
  return {kDLFloat, 32, 1};
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64:
    case DType::I64: return 8;
    case DType::F32:
    case DType::I32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::U8: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::U8: return "uint8";
  }
  return "?";
}

const char* dl_dtype_text(DLDataType dl, char (&buf)[32]) {
  const char* kind = dl.code == kDLFloat    ? "float"
                     : dl.code == kDLBfloat ? "bfloat"
                     : dl.code == kDLInt    ? "int"
                     : dl.code == kDLUInt   ? "uint"
                                            : "code";
  if (dl.lanes == 1)
    std::snprintf(buf, sizeof buf, "%s%u", kind, unsigned(dl.bits));
  else
    std::snprintf(buf, sizeof buf, "%s%ux%u", kind, unsigned(dl.bits), unsigned(dl.lanes));
  return buf;
}

}  // namespace ddph
