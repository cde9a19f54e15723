#!/usr/bin/env bash
# The mini recipe: a corpus spoken by espeak-ng, then the whole Kaldi-style pipeline.
#   ./run.sh                       all stages
#   ./run.sh --stage 4 --algo adpsgd-random --learners 4
# Every stage calls one asrdist CLI and skips work that is already done.
set -euo pipefail
cd "$(dirname "$0")"
. ./path.sh
. "$repo_root/local/log.sh"

stage=0
stop_stage=100
hours=3.0          # training audio, hours
seed=0
nj=2               # parallel jobs for features, alignment, decoding
algo=ssgd          # distributed strategy for stage 4
learners=1         # learner processes for stage 4
help_message="Usage: $0 [--stage N] [--stop-stage M] [--hours H] [--nj J] [--algo A] [--learners N]"
. "$repo_root/local/parse_options.sh"

data=data
exp=exp

if [ $stage -le 0 ] && [ $stop_stage -ge 0 ]; then
  run_stage 0 corpus asrdist-prepare-mini --out $data --hours $hours --seed $seed
fi

if [ $stage -le 1 ] && [ $stop_stage -ge 1 ]; then
  for part in train test; do
    run_stage 1 "fbank $part" asrdist-features --kind fbank --nj $nj $data/$part $data/${part}_fbank
    run_stage 1 "mfcc $part" asrdist-features --kind mfcc --nj $nj $data/$part $data/${part}_mfcc
  done
fi

if [ $stage -le 2 ] && [ $stop_stage -ge 2 ]; then
  run_stage 2 "monophone GMM" asrdist-align-gmm --nj $nj $data/train_mfcc $data/lang $exp/mono
fi

if [ $stage -le 3 ] && [ $stop_stage -ge 3 ]; then
  run_stage 3 ingestion asrdist-ingest-ali $exp/mono $data/train_fbank/feats.scp $exp/mono_pdf
fi
