#!/usr/bin/env bash
# Switchboard-1 (~300 h): a BLSTM hybrid trained with any distributed strategy on the
# alignments of the user's Kaldi system, decoded with its graph, scored on eval2000 as
# Kaldi's local/score_sclite.sh does. See README.md. With your s5c system's data dirs (route 1):
#   ./run.sh --train-data ~/kaldi/egs/swbd/s5c/data/train_nodup --test-data \
#       ~/kaldi/egs/swbd/s5c/data/eval2000 --ali-dir ~/kaldi/egs/swbd/s5c/exp/tri4_ali_nodup \
#       --graph-dir ~/kaldi/egs/swbd/s5c/exp/tri4/graph_sw1_tg --algo adpsgd-random --learners 8
# or from the LDC releases alone (route 2: data dirs as s5c's scripts make them):
#   ./run.sh --swbd-audio /LDC/LDC97S62 --ms98 /LDC/swb_ms98_transcriptions \
#       --eval2000-audio /LDC/LDC2002S09 --eval2000-ref /LDC/LDC2002T43 \
#       --ali-dir ~/kaldi/egs/swbd/s5c/exp/tri4_ali_nodup \
#       --graph-dir ~/kaldi/egs/swbd/s5c/exp/tri4/graph_sw1_tg --algo adpsgd-random --learners 8
# The stages (--stage N --stop-stage M runs N..M):
#   0 data       route 1 (--train-data, --test-data): your Kaldi data dirs, as they are;
#                route 2: asrdist-prepare-swbd: LDC releases -> data/{train,train_dev,
#                train_nodup,eval2000} as s5c makes them
#   1 features   40-dim log-mel fbank at 8 kHz, Kaldi framing (or your Kaldi feats as is);
#                with extra streams (fMLLR, i-vectors), fbank + deltas with them joined per frame
#   2 targets    asrdist-ingest-ali: the Kaldi alignment dir -> pdf-id targets
#   3 train      asrdist-train (any --algo) under srun / mpiexec / torchrun
#   4 decode     network once over eval2000 (scores kept), then the LM-weight x WIP sweep;
#                with --rescore-lm, the lattices rescored with a 4-gram (lmrescore_const_arpa.sh)
#   5 score      s5c's score_sclite.sh: recording-relative CTM, filter, acronyms mapped back
#                with its dict's acronyms.map, hubscr semantics; exp/RESULTS: a line per run dir
set -euo pipefail
cd "$(dirname "$0")"
. ./path.sh
. ./cmd.sh
. "$repo_root/local/swbd/defaults.sh"
help_message="Usage: $0 --train-data DIR --test-data DIR --ali-dir DIR --graph-dir DIR [options]
   or: $0 --swbd-audio DIR --ms98 DIR --eval2000-audio DIR --eval2000-ref DIR
       --ali-dir DIR --graph-dir DIR [options]
(options: $repo_root/local/swbd/defaults.sh)"
. "$repo_root/local/parse_options.sh"
. "$repo_root/local/swbd/check_paths.sh"
. "$repo_root/local/swbd/dirs.sh"
. "$repo_root/local/swbd/rescore.sh"
. "$repo_root/local/swbd/stages.sh"
. "$repo_root/local/log.sh"
check_swbd_paths

# scoring maps acronyms back as s5c's score_sclite.sh does, with the map of the dict the graph
# was made from: your system's (beside --test-data) on route 1, stage 0's on route 2
if [ -z "$acronyms" ] && [ -n "$test_data" ]; then
  acronyms=$(dirname "$test_data")/local/dict_nosp/acronyms.map
  [ -f "$acronyms" ] || _path_error --acronyms "" "required with --test-data when \
$acronyms does not exist: give your s5c system's data/local/dict_nosp/acronyms.map"
fi
[ -z "$acronyms" ] || [ -f "$acronyms" ] || _path_error --acronyms "$acronyms" "no such file"
prepare_opts=()
add_convention_opts  # --sp-prefix, --allow-partial, --extend-eval2000
train_set=train_nodup${speed_perturb:+_sp}
swbd_dirs  # train_src, train_dir, train_input, targets, run, decode (and the test set's)
rescore_dirs  # with --rescore-lm: rescore_old_lang, rescore_name, decode_rescored

if [ $stage -le 0 ] && [ $stop_stage -ge 0 ]; then
  swbd_data  # route 1: your data dirs as they are; route 2: asrdist-prepare-swbd -> $data
fi

if [ $stage -le 1 ] && [ $stop_stage -ge 1 ]; then
  swbd_features  # asrdist-features (fbank), with --extra-feats asrdist-join-feats
fi

if [ $stage -le 2 ] && [ $stop_stage -ge 2 ]; then
  swbd_targets  # asrdist-ingest-ali: $ali_dir -> $targets
fi

if [ $stage -le 3 ] && [ $stop_stage -ge 3 ]; then
  swbd_train  # asrdist-train --algo $algo on $learners learners -> $run/final.pt
fi

if [ $stage -le 4 ] && [ $stop_stage -ge 4 ]; then
  swbd_decode  # asrdist-compute-loglikes, asrdist-decode (with --rescore-lm asrdist-lmrescore)
fi

if [ $stage -le 5 ] && [ $stop_stage -ge 5 ]; then
  # s5c's score_sclite.sh maps acronyms back with the map of the dict the graph was made from
  swbd_score --recipe s5c --acronyms "${acronyms:-$data/local/dict_nosp/acronyms.map}"
fi
