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
check_swbd_paths

prepare_opts=()
# scoring maps acronyms back as s5c's score_sclite.sh does, with the map of the dict the graph
# was made from: your system's (beside --test-data) on route 1, stage 0's on route 2
if [ -z "$acronyms" ] && [ -n "$test_data" ]; then
  acronyms=$(dirname "$test_data")/local/dict_nosp/acronyms.map
  [ -f "$acronyms" ] || _path_error --acronyms "" "required with --test-data when \
$acronyms does not exist: give your s5c system's data/local/dict_nosp/acronyms.map"
fi
[ -z "$acronyms" ] || [ -f "$acronyms" ] || _path_error --acronyms "$acronyms" "no such file"
score_opts=(--recipe s5c --acronyms "${acronyms:-$data/local/dict_nosp/acronyms.map}")
train_set=train_nodup${speed_perturb:+_sp}
. "$repo_root/local/swbd/pipeline.sh"
