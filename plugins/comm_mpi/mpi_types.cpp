#include "plugins/comm_mpi/mpi_types.h"

#include <mutex>

#include "core/base/error.h"
#include "core/comm/backend_types.h"
#include "core/kernels/reduce.h"
#include "plugins/comm_mpi/mpi_check.h"

namespace ddph {
namespace comm_mpi {
namespace {

// MPI's signature: inout[i] = in[i] op inout[i]. Never throws into MPI: the
// op and dtype are fixed at compile time and valid.
template <DType D, ddph_reduce_op_t O>
void user_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  try {
    reduce_into(O, D, inout, in, inout, size_t(*len));
  } catch (...) {
  }
}

struct UserOps {
  // [dtype][op]: op is SUM, MAX, MIN (index 0, 2, 3 of ddph_reduce_op_t).
  MPI_Op ops[7][4] = {};
};

template <DType D>
void create_ops(UserOps& u) {
  MPICHECK(MPI_Op_create(&user_reduce<D, DDPH_SUM>, 1, &u.ops[int(D)][DDPH_SUM]),
           "comm_mpi: creating the SUM op");
  MPICHECK(MPI_Op_create(&user_reduce<D, DDPH_MAX>, 1, &u.ops[int(D)][DDPH_MAX]),
           "comm_mpi: creating the MAX op");
  MPICHECK(MPI_Op_create(&user_reduce<D, DDPH_MIN>, 1, &u.ops[int(D)][DDPH_MIN]),
           "comm_mpi: creating the MIN op");
}

const UserOps& user_ops() {
  static std::once_flag once;
  static UserOps ops;
  std::call_once(once, [] {
    create_ops<DType::F32>(ops);
    create_ops<DType::F64>(ops);
    create_ops<DType::F16>(ops);
    create_ops<DType::BF16>(ops);
  });
  return ops;
}

bool is_native_float(DType d) {
  return d == DType::F32 || d == DType::F64;
}
bool is_half(DType d) {
  return d == DType::F16 || d == DType::BF16;
}

}  // namespace

MPI_Datatype mpi_datatype(DType dtype) {
  // float16 and bfloat16 travel as their bits (mpi_types.h).
  static const MPI_Datatype kTypes[] = {MPI_FLOAT,   MPI_DOUBLE,  MPI_UINT16_T, MPI_UINT16_T,
                                        MPI_INT32_T, MPI_INT64_T, MPI_UINT8_T};
  return backend_dtype(kTypes, dtype, "comm_mpi");
}

MPI_Op mpi_op(DType dtype, ddph_reduce_op_t op) {
  const ddph_reduce_op_t base = op == DDPH_AVG ? DDPH_SUM : op;
  if (is_half(dtype) || (is_native_float(dtype) && base != DDPH_SUM))
    return user_ops().ops[int(dtype)][backend_op(base, DDPH_SUM, DDPH_MAX, DDPH_MIN, "comm_mpi")];
  return backend_op(op, MPI_SUM, MPI_MAX, MPI_MIN, "comm_mpi");
}

}  // namespace comm_mpi
}  // namespace ddph
