#!/usr/bin/env bash
# `ddph train --config MPI_CONFIG` under mpirun: every process is one rank
# (rank and world from the launcher), the ranks end bit-identical, and the
# whole-training-set loss equals GLOO_CONFIG's, the same job over Gloo (3
# local ranks), to 1e-4 relative: the same averages, summed in another
# order. MPI_CONFIG "-" is GLOO_CONFIG with its comm line made MPI's.
# LOSS_TOLERANCE (default 1e-4) widens that for optimizers that amplify
# round-off, as Adam's division by the gradient's root mean square does.
#   train_under_mpirun.sh DDPH_BINARY MPI_CONFIG GLOO_CONFIG MPIRUN [MPIRUN_FLAG ...]
# The MPIRUN command line must start 3 ranks.
set -euo pipefail
ddph=$1 mpi_config=$2 gloo_config=$3
shift 3
mpirun=("$@")
if [ "$mpi_config" = - ]; then
  mpi_config=$(mktemp --suffix=.yaml)
  trap 'rm -f "$mpi_config"' EXIT
  sed 's/^comm: .*/comm: {backend: mpi, timeout: 60s}/' "$gloo_config" > "$mpi_config"
  grep -q "backend: mpi" "$mpi_config" || { echo "FAIL: no comm line in $gloo_config" >&2; exit 1; }
fi
steps=300
flags=(--steps "$steps" --log-every "$steps" --seed 7)

loss_of() {  # prints the train-set loss of a run's output, after checking it
  echo "$1" | grep -q "parameters bit-identical on all 3 ranks" || {
    echo "$1" >&2
    echo "FAIL: not 3 ranks with identical parameters" >&2
    exit 1
  }
  echo "$1" | sed -n 's/^train-set loss \([0-9.e+-]*\).*/\1/p'
}

mpi_out=$("${mpirun[@]}" "$ddph" train --config "$mpi_config" "${flags[@]}")
echo "$mpi_out"
gloo_out=$("$ddph" train --config "$gloo_config" --world 3 "${flags[@]}")
mpi_loss=$(loss_of "$mpi_out")
gloo_loss=$(loss_of "$gloo_out")
echo "train-set loss: mpi $mpi_loss, gloo $gloo_loss"
awk -v a="$gloo_loss" -v b="$mpi_loss" -v tol="${LOSS_TOLERANCE:-1e-4}" 'BEGIN {
  if (!(a > 0 && b > 0)) { print "FAIL: no loss parsed"; exit 1 }
  d = (b - a) / a; if (d < 0) d = -d
  printf "relative difference %.2e\n", d
  if (d > tol) { print "FAIL: the MPI run ends elsewhere than the Gloo run"; exit 1 }
}'
