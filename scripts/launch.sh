#!/usr/bin/env bash
# Starts one process per GPU for a data-parallel job, as torchrun does: each gets RANK, WORLD_SIZE,
# LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT, and minidl's programs given
# --distributed read them (distributed::init). If one process fails, the others are stopped and the
# launcher exits with its status, naming the rank.
#
#   scripts/launch.sh --nproc-per-node 2 build/mnist_cnn --distributed --epochs 3
#   # two machines, two GPUs each; run on each machine with its --node-rank:
#   scripts/launch.sh --nproc-per-node 2 --nnodes 2 --node-rank 0 --master 10.0.0.1:29500 build/bench --distributed
set -uo pipefail

usage() {
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  echo "usage: $0 --nproc-per-node N [--nnodes M --node-rank R] [--master ADDR:PORT] PROGRAM [ARGS...]" >&2
  exit 2
}

nproc=1 nnodes=1 node_rank=0 master=""
while (($#)); do
  case "$1" in
    --nproc-per-node) nproc=${2:-}; shift 2 ;;
    --nnodes) nnodes=${2:-}; shift 2 ;;
    --node-rank) node_rank=${2:-}; shift 2 ;;
    --master) master=${2:-}; shift 2 ;;
    -h|--help) usage ;;
    --) shift; break ;;
    -*) echo "launch.sh: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
(($#)) || { echo "launch.sh: no program to start" >&2; usage; }
for v in "$nproc" "$nnodes" "$node_rank"; do
  [[ "$v" =~ ^[0-9]+$ ]] || { echo "launch.sh: '$v' is not a whole number" >&2; exit 2; }
done
((nproc >= 1 && nnodes >= 1)) || { echo "launch.sh: --nproc-per-node and --nnodes must be at least 1" >&2; exit 2; }
((node_rank < nnodes)) || { echo "launch.sh: --node-rank $node_rank is outside 0..$((nnodes - 1))" >&2; exit 2; }
if [[ -z "$master" ]]; then
  ((nnodes == 1)) || { echo "launch.sh: with --nnodes > 1, give --master ADDR:PORT (node 0's address)" >&2; exit 2; }
  master="127.0.0.1:29500"
fi
[[ "$master" =~ ^(.+):([0-9]+)$ ]] || { echo "launch.sh: --master must be ADDR:PORT, got '$master'" >&2; exit 2; }

export MASTER_ADDR=${BASH_REMATCH[1]} MASTER_PORT=${BASH_REMATCH[2]}
export WORLD_SIZE=$((nproc * nnodes)) LOCAL_WORLD_SIZE=$nproc
# NVLink multicast (NVLS) can take a shared host's GPUs out of service; leave it to the user to enable.
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}

declare -A rank_of=()  # the ranks still running, by process id
signal_all() { for p in "${!rank_of[@]}"; do kill "-$1" "$p" 2>/dev/null; done; }
trap 'signal_all INT' INT
trap 'signal_all TERM' TERM
for ((i = 0; i < nproc; i++)); do
  RANK=$((node_rank * nproc + i)) LOCAL_RANK=$i "$@" &
  rank_of[$!]=$((node_rank * nproc + i))
done

# Poll rather than `wait -n`: a child that ends while the others are being stopped is still reaped
# with its status, whatever order they end in.
status=0
while ((${#rank_of[@]} > 0)); do
  for pid in "${!rank_of[@]}"; do
    kill -0 "$pid" 2>/dev/null && continue
    wait "$pid"
    rc=$?
    rank=${rank_of[$pid]}
    unset "rank_of[$pid]"
    if ((rc != 0 && status == 0)); then
      status=$rc
      echo "launch.sh: rank $rank exited with status $rc; stopping the other ranks" >&2
      signal_all TERM
    fi
  done
  ((${#rank_of[@]} > 0)) && sleep 0.2
done
exit "$status"
