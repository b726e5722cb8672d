#!/usr/bin/env bash
# `ddph train` with hook_then_optimizer steps each parameter once per step,
# in the hook, and not again itself:
#   - with lr 0 the hook's step is zero and the trainer must add none, so the
#     whole-training-set loss after 5 steps equals the initial model's
#     (after 1 step);
#   - with lr 0.1 the same run moves (the hook does step).
#   train_steps_once.sh DDPH_BINARY
set -euo pipefail
ddph=$1
dir=$(mktemp -d /tmp/ddph-steps-once-XXXXXX)
trap 'rm -rf "$dir"' EXIT
for lr in 0 0.1; do
  printf 'comm: {backend: gloo, timeout: 60s}\nhook:\n  family: optimizer_overlap\n  name: hook_then_optimizer\n  options: {optimizer: sgd, lr: %s, momentum: 0.9}\n  wrap: {family: default, name: allreduce}\n' \
    "$lr" > "$dir/lr$lr.yaml"
done
loss() {  # loss CONFIG STEPS
  "$ddph" train --config "$1" --steps "$2" --log-every "$2" |
    sed -n 's/^train-set loss \([0-9.e+-]*\).*/\1/p'
}
start=$(loss "$dir/lr0.yaml" 1)
frozen=$(loss "$dir/lr0.yaml" 5)
moved=$(loss "$dir/lr0.1.yaml" 5)
echo "train-set loss: initial $start, lr 0 after 5 steps $frozen, lr 0.1 after 5 steps $moved"
[ -n "$start" ] || { echo "FAIL: no loss parsed"; exit 1; }
[ "$start" = "$frozen" ] || { echo "FAIL: parameters moved with lr 0: the trainer stepped too"; exit 1; }
[ "$start" != "$moved" ] || { echo "FAIL: parameters did not move with lr 0.1: the hook did not step"; exit 1; }
echo PASS
