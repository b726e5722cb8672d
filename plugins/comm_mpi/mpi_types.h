// ddphooks element types and reductions in MPI's terms.
//
// float16 and bfloat16 travel as MPI_UINT16_T (MPI has no such types) and
// are reduced by user-defined MPI_Ops built on core's kernels
// (reduce_into): float16/bfloat16 add in float and round once per add, as
// comm_gloo and torch do. MAX/MIN on floating types use user ops too, so a
// NaN operand wins as in torch.maximum (MPI's built-in MPI_MAX makes no
// promise about NaN). Everything else uses MPI's built-in ops, which give
// the same bits: one IEEE add per pair, integers wrapping around.
#pragma once

#include <ddph/ddph.h>
#include <mpi.h>

#include "core/base/dtype.h"

namespace ddph {
namespace comm_mpi {

MPI_Datatype mpi_datatype(DType dtype);

// The op that reduces dtype with op; DDPH_AVG reduces with SUM (the caller
// divides first). Creates the user ops on first use; needs MPI initialized.
MPI_Op mpi_op(DType dtype, ddph_reduce_op_t op);

}  // namespace comm_mpi
}  // namespace ddph
