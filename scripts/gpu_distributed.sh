#!/usr/bin/env bash
# Data-parallel training on one machine with two or more GPUs (docs/distributed.md), in steps:
#   test      the distributed tests (collectives, DDP against one process, inside a CUDA graph)
#   launch    scripts/launch.sh as two "machines" on 127.0.0.1 (one GPU each, the TCP rendezvous),
#             and a rank killed mid-run: the other must stop with a clear error within the timeout
#   accuracy  mnist_cnn with 2 processes x batch B against 1 process x batch 2B, same seed, 3 epochs
#   scaling   bench: images/s of the CNN on 1 GPU and on 2 at the same per-GPU batch (64, 512),
#             alternating with PyTorch DDP (scripts/bench_pytorch_ddp.py under torchrun)
#
#   BUILD_DIR=build-gpu MINIDL_DATA=datasets OUT=dist-results scripts/gpu_distributed.sh [steps...]
# Needs a CUDA build with NCCL (NCCL_ROOT: pip's nvidia/nccl has include/ and lib/). Summary in $OUT/summary.txt.
set -u -o pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build-gpu}
DATA=${MINIDL_DATA:-datasets}
OUT=${OUT:-dist-results}
REPS=${REPS:-2}
STEPS=${*:-test launch accuracy scaling}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
export NCCL_NVLS_ENABLE=0
say() { echo "$*" | tee -a "$SUMMARY"; }
want() { [[ " $STEPS " == *" $1 "* ]]; }
port() { echo $((20000 + RANDOM % 20000)); }

if want test; then
  timeout 300 "$B/minidl_tests" --gtest_filter='CudaDistributed.*:Rendezvous.*:DistributedSampler.*:PostAccumulate*' \
    >"$OUT/tests.log" 2>&1
  say "test: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure|error:" "$OUT/tests.log" | head -20 | tee -a "$SUMMARY"
fi

if want launch; then
  nvidia-smi topo -m >"$OUT/topology.txt" 2>&1
  p=$(port)
  nodes=()
  for node in 0 1; do
    CUDA_VISIBLE_DEVICES=$node NCCL_DEBUG=INFO timeout 120 scripts/launch.sh --nnodes 2 --node-rank $node --nproc-per-node 1 \
      --master 127.0.0.1:$p "$B/bench" --model mlp --batch-size 512 --data "$DATA" --distributed >"$OUT/node$node.log" 2>&1 &
    nodes+=($!)
  done
  wait "${nodes[0]}"; rc0=$?; wait "${nodes[1]}"; rc1=$?
  say "launch, two nodes over tcp://127.0.0.1:$p: exit $rc0 / $rc1: $(grep img/s "$OUT/node0.log")"
  NCCL_DEBUG=INFO timeout 120 scripts/launch.sh --nproc-per-node 2 --master 127.0.0.1:$(port) "$B/bench" --model mlp \
    --batch-size 512 --data "$DATA" --distributed >"$OUT/nccl_info.log" 2>&1
  say "NCCL between the two GPUs: $(grep -E 'Channel 00.* via ' "$OUT/nccl_info.log" | head -2 | sed 's/.*NCCL INFO //' | tr '\n' ' ')"
  # A rank that dies: rank 0 must end (status 1, the watchdog's message) within the timeout.
  p=$(port)
  export MASTER_ADDR=127.0.0.1 MASTER_PORT=$p WORLD_SIZE=2 MINIDL_DIST_TIMEOUT=15
  RANK=0 LOCAL_RANK=0 timeout 120 "$B/mnist_cnn" --distributed --epochs 1000 --data "$DATA" >"$OUT/dies0.log" 2>&1 &
  pid0=$!
  RANK=1 LOCAL_RANK=1 "$B/mnist_cnn" --distributed --epochs 1000 --data "$DATA" >"$OUT/dies1.log" 2>&1 &
  pid1=$!
  sleep 8
  kill -9 $pid1; killed=$SECONDS
  wait $pid0; rc=$?
  unset MASTER_ADDR MASTER_PORT WORLD_SIZE MINIDL_DIST_TIMEOUT
  say "rank 1 killed: rank 0 exited with status $rc after $((SECONDS - killed)) s (timeout 15 s); its stderr:"
  grep -v "^Epoch\|^\s*$" "$OUT/dies0.log" | tail -3 | tee -a "$SUMMARY"
fi

if want accuracy; then
  timeout 300 scripts/launch.sh --nproc-per-node 2 "$B/mnist_cnn" --distributed --epochs 3 --batch-size 64 \
    --data "$DATA" --log-interval 100000 >"$OUT/acc_2x64.log" 2>&1
  say "mnist_cnn, 2 processes x batch 64 (exit $?):"; grep "Test set" "$OUT/acc_2x64.log" | tee -a "$SUMMARY"
  timeout 300 "$B/mnist_cnn" --device cuda --epochs 3 --batch-size 128 --data "$DATA" --log-interval 100000 \
    >"$OUT/acc_1x128.log" 2>&1
  say "mnist_cnn, 1 process x batch 128 (exit $?):"; grep "Test set" "$OUT/acc_1x128.log" | tee -a "$SUMMARY"
fi

if want scaling; then
  for ((rep = 1; rep <= REPS; rep++)); do
    for b in 64 512; do
      timeout 120 "$B/bench" --model cnn --batch-size $b --device cuda --data "$DATA" 2>&1 | grep img/s | sed "s/^/minidl 1 gpu: /" >>"$OUT/scaling.txt"
      timeout 120 scripts/launch.sh --nproc-per-node 2 --master 127.0.0.1:$(port) "$B/bench" --model cnn --batch-size $b \
        --data "$DATA" --distributed 2>&1 | grep img/s | sed "s/^/minidl 2 gpus: /" >>"$OUT/scaling.txt"
      for n in 1 2; do
        timeout 180 python3 -m torch.distributed.run --nproc-per-node $n --master-port $(port) scripts/bench_pytorch_ddp.py \
          --model cnn --batch-size $b --data "$DATA/mnist" 2>&1 | grep img/s >>"$OUT/scaling.txt"
      done
    done
  done
  for b in ${PYTORCH_GRAPH_BATCHES-64 512}; do  # PyTorch's whole-step graph under DDP, once (PYTORCH_GRAPH_BATCHES= skips it)
    timeout 180 python3 -m torch.distributed.run --nproc-per-node 2 --master-port $(port) scripts/bench_pytorch_ddp.py \
      --model cnn --batch-size $b --data "$DATA/mnist" --mode graph >"$OUT/pytorch_graph_$b.log" 2>&1
    grep img/s "$OUT/pytorch_graph_$b.log" >>"$OUT/scaling.txt" || echo "pytorch ddp graph  batch $b: failed (pytorch_graph_$b.log)" >>"$OUT/scaling.txt"
  done
  say "scaling (images/s of the whole job):"; cat "$OUT/scaling.txt" | tee -a "$SUMMARY" >/dev/null
fi
