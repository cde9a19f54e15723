#!/usr/bin/env bash
# Switchboard-1 + Fisher (~2000 h): the papers' setup. As recipes/swbd300 with the Fisher
# releases added, data dirs as Kaldi's egs/fisher_swbd/s5 makes them (train = Fisher + all of
# Switchboard, train_nodup its duplicates drawn down, train_nodup_sp). See README.md. With
# your fisher_swbd system's data dirs (route 1):
#   ./run.sh --train-data ~/kaldi/egs/fisher_swbd/s5/data/train_nodup_sp \
#       --test-data ~/kaldi/egs/fisher_swbd/s5/data/eval2000 \
#       --ali-dir ~/kaldi/egs/fisher_swbd/s5/exp/tri5a_ali_nodup_sp \
#       --graph-dir ~/kaldi/egs/fisher_swbd/s5/exp/tri5a/graph_fsh_sw1_tg
# or from the LDC releases alone (route 2):
#   ./run.sh --swbd-audio /LDC/LDC97S62 --ms98 /LDC/swb_ms98_transcriptions \
#       --eval2000-audio /LDC/LDC2002S09 --eval2000-ref /LDC/LDC2002T43 \
#       --fisher-audio "/LDC/LDC2004S13 /LDC/LDC2005S13" --fisher-text "/LDC/LDC2004T19 /LDC/LDC2005T19" \
#       --ali-dir ~/kaldi/egs/fisher_swbd/s5/exp/tri5a_ali_nodup_sp --speed-perturb "0.9 1.0 1.1" \
#       --graph-dir ~/kaldi/egs/fisher_swbd/s5/exp/tri5a/graph_fsh_sw1_tg
# The stages (--stage N --stop-stage M runs N..M):
#   0 data       route 1 (--train-data, --test-data): your Kaldi data dirs, as they are;
#                route 2: asrdist-prepare-swbd: LDC releases (Fisher too) ->
#                data/{train,train_nodup,train_swbd,eval2000} as fisher_swbd makes them
#   1 features   40-dim log-mel fbank at 8 kHz, Kaldi framing (or your Kaldi feats as is);
#                with extra streams (fMLLR, i-vectors), fbank + deltas with them joined per frame
#   2 targets    asrdist-ingest-ali: the Kaldi alignment dir -> pdf-id targets
#   3 train      asrdist-train (any --algo) under srun / mpiexec / torchrun
#   4 decode     network once over eval2000 (scores kept), then the LM-weight x WIP sweep;
#                with --rescore-lm, the lattices rescored with a 4-gram (lmrescore_const_arpa.sh)
#   5 score      fisher_swbd's score_sclite.sh: recording-relative CTM, filter, acronyms split
#                (format_acronyms_ctm_eval2000.py), hubscr semantics; exp/RESULTS: a line per
#                run dir
set -euo pipefail
cd "$(dirname "$0")"
. ./path.sh
. ./cmd.sh
. "$repo_root/local/swbd/defaults.sh"
fisher_audio=""     # LDC2004S13 and LDC2005S13 (fe_03_NNNNN.sph), space-separated
fisher_text=""      # LDC2004T19 and LDC2005T19 (fe_03_NNNNN.txt), space-separated
help_message="Usage: $0 --train-data DIR --test-data DIR --ali-dir DIR --graph-dir DIR [options]
   or: $0 --swbd-audio DIR --ms98 DIR --eval2000-audio DIR --eval2000-ref DIR
       --fisher-audio \"DIR DIR\" --fisher-text \"DIR DIR\" --ali-dir DIR --graph-dir DIR [options]
(options: $repo_root/local/swbd/defaults.sh)"
. "$repo_root/local/parse_options.sh"
. "$repo_root/local/swbd/check_paths.sh"
. "$repo_root/local/swbd/dirs.sh"
. "$repo_root/local/swbd/rescore.sh"
. "$repo_root/local/swbd/stages.sh"
. "$repo_root/local/log.sh"
check_swbd_paths

prepare_opts=()
if [ -z "$train_data" ]; then  # route 2: the Fisher releases too
  [ -n "$fisher_audio" ] || _path_error --fisher-audio "" "required: give LDC2004S13 and LDC2005S13"
  [ -n "$fisher_text" ] || _path_error --fisher-text "" "required: give LDC2004T19 and LDC2005T19"
  for d in $fisher_audio; do
    need_found --fisher-audio "$d" "Fisher audio (LDC2004S13, LDC2005S13) with fe_03_*.sph" \
      "fe_03_*.sph"
    prepare_opts+=(--fisher-audio "$d")
  done
  for d in $fisher_text; do
    need_found --fisher-text "$d" "Fisher transcripts (LDC2004T19, LDC2005T19) with fe_03_*.txt" \
      "fe_03_*.txt"
    prepare_opts+=(--fisher-text "$d")
  done
fi
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
  # fisher_swbd's score_sclite.sh splits acronyms (format_acronyms_ctm_eval2000.py): no map
  swbd_score --recipe fisher_swbd
fi
