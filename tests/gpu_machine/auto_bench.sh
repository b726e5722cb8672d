# ddph bench --device cuda with hook: {family: auto} (configs/auto.yaml's
# candidates): 4 MiB GPU buckets, 2 ranks on the one GPU over Gloo (which
# stages CUDA buckets through host memory, so a hook completes when its
# bytes have moved), then world 1 over NCCL (where a hook completes when
# its work is enqueued on the bucket's stream). Each prints what auto chose.
set -u
cand='candidates: "allreduce,fp16,bf16,q8,q4ef,powersgd4"'
printf 'comm: {backend: gloo, rendezvous: "file:///tmp/ddph-auto", timeout: 120s}\nhook: {family: auto, name: auto, options: {%s}}\n' "$cand" > /tmp/auto_gloo.yaml
printf 'comm: {backend: nccl, rendezvous: "file:///tmp/ddph-auto", timeout: 60s, options: {device: 0}}\nhook: {family: auto, name: auto, options: {%s}}\n' "$cand" > /tmp/auto_nccl.yaml
build/bin/ddph bench --device cuda --world 2 --bucket-size 4MiB --iters 60 --warmup 3 --config /tmp/auto_gloo.yaml
build/bin/ddph bench --device cuda --world 1 --bucket-size 4MiB --iters 60 --warmup 3 --config /tmp/auto_nccl.yaml
