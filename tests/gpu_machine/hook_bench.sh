# ddph bench --device cuda at world 1 over NCCL: 25 MB buckets for the
# default and quantization hooks, a 100 MB bucket of 1024 x 1024 matrices
# for powersgd; 5 runs each, one JSON line per config and run.
# Then powersgd on the same model at world 2, both ranks on the one GPU,
# over Gloo (which stages CUDA buckets through host memory): a world of one
# moves nothing, so only this run has a baseline to compare with, as issue
# 4's benchmark asks (world 2, 0.3x of allreduce).
set -u
nccl='{backend: nccl, rendezvous: "file:///tmp/ddph-job", timeout: 60s, options: {device: 0}}'
gloo='{backend: gloo, rendezvous: "file:///tmp/ddph-job", timeout: 120s}'
mk() { printf 'comm: %s\nhook: {family: %s, name: %s, options: {%s}}\n' "$2" "$3" "$4" "$5" > /tmp/$1.yaml; }
mk allreduce "$nccl" default allreduce ""
mk noop "$nccl" debugging noop ""
mk fp16 "$nccl" default fp16_compress ""
mk bf16 "$nccl" default bf16_compress ""
mk q_rs8 "$nccl" quantization per_channel "protocol: reduce_scatter, bits: 8"
mk q_rs4_ef "$nccl" quantization per_channel "protocol: reduce_scatter, bits: 4, error_feedback: true"
mk q_ag8 "$nccl" quantization per_channel "protocol: allgather, bits: 8"
mk q_tensor "$nccl" quantization per_tensor ""
mk psgd1 "$nccl" powersgd powersgd "rank: 1, start_iter: 2"
mk psgd4 "$nccl" powersgd powersgd "rank: 4, start_iter: 2"
mk psgd1_noef "$nccl" powersgd powersgd "rank: 1, start_iter: 2, error_feedback: false"
mk gloo_psgd1 "$gloo" powersgd powersgd "rank: 1, start_iter: 2"
mk gloo_psgd4 "$gloo" powersgd powersgd "rank: 4, start_iter: 2"
for run in 1 2 3 4 5; do
  build/bin/ddph bench --device cuda --world 1 --bucket-size 25MiB --iters 20 --warmup 5 --json \
    --config /tmp/allreduce.yaml --config /tmp/noop.yaml --config /tmp/fp16.yaml --config /tmp/bf16.yaml \
    --config /tmp/q_rs8.yaml --config /tmp/q_rs4_ef.yaml --config /tmp/q_ag8.yaml --config /tmp/q_tensor.yaml
  build/bin/ddph bench --device cuda --world 1 --bucket-size 100MiB --matrix 1024x1024 --iters 10 --warmup 3 --json \
    --config /tmp/allreduce.yaml --config /tmp/psgd1.yaml --config /tmp/psgd4.yaml --config /tmp/psgd1_noef.yaml
  build/bin/ddph bench --device cuda --world 2 --bucket-size 100MiB --matrix 1024x1024 --iters 10 --warmup 3 --json \
    --config /tmp/gloo_psgd1.yaml --config /tmp/gloo_psgd4.yaml
done
