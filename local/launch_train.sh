#!/usr/bin/env bash
# Start asrdist-train (or --command, e.g. asrdist-pretrain-rbm) with N learners, picking the
# launcher:
#   local/launch_train.sh [--learners N] [--launcher auto|srun|mpiexec|torchrun|none]
#                         [--command asrdist-train] -- ARGS...
# auto: srun inside a Slurm allocation (SLURM_JOB_ID set), else mpiexec when on PATH, else
# torchrun (as asrdist-torchrun, so a stop after a checkpoint exits 75 as asrdist-train does:
# plain torchrun turns it into 1); N = 1 runs asrdist-train directly. ARGS go to asrdist-train unchanged, e.g.
#   local/launch_train.sh --learners 4 -- --data data/train_fbank --targets exp/mono_pdf \
#       --out exp/blstm_adpsgd-random --algo adpsgd-random
set -euo pipefail

learners=1
launcher=auto
cmd=asrdist-train
while [ $# -gt 0 ]; do
  case "$1" in
    --learners) learners=$2; shift 2 ;;
    --launcher) launcher=$2; shift 2 ;;
    --command) cmd=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "$0: unknown option $1 (options before --, the command's after it)" >&2; exit 1 ;;
  esac
done

if [ "$learners" -le 1 ] || [ "$launcher" = none ]; then
  exec "$cmd" "$@"
fi
if [ "$launcher" = auto ]; then
  if [ -n "${SLURM_JOB_ID:-}" ] && command -v srun >/dev/null; then launcher=srun
  elif command -v mpiexec >/dev/null; then launcher=mpiexec
  elif command -v asrdist-torchrun >/dev/null; then launcher=torchrun
  else echo "$0: no launcher found (srun, mpiexec, torchrun) for $learners learners" >&2; exit 1
  fi
fi
case "$launcher" in
  srun)  # asrdist ends a failed job itself; --elastic: srun must let the survivors go on
    keep_going=()
    for arg in "$@"; do
      if [ "$arg" = "--elastic" ]; then keep_going=(--no-kill --kill-on-bad-exit=0); fi
    done
    exec srun --ntasks "$learners" ${keep_going[@]+"${keep_going[@]}"} "$cmd" "$@" ;;
  mpiexec) exec mpiexec -n "$learners" "$cmd" "$@" ;;
  torchrun) exec asrdist-torchrun --standalone --nproc-per-node "$learners" "$(command -v "$cmd")" "$@" ;;
  *) echo "$0: --launcher $launcher: choose auto, srun, mpiexec, torchrun or none" >&2; exit 1 ;;
esac
