#!/usr/bin/env bash
# Remakes the Kaldi data dirs in this folder by running Kaldi's own egs/swbd/s5c scripts (stages
# 0-2, 5, 7, 8 of s5c's run.sh, stage 1 of local/nnet3/run_ivector_common.sh) on the fixture
# tree of tests.corpus.ldc_fixture.make_prep_tree.
# Nothing here comes from asrdist's data prep: asrdist only writes the fixture's input files.
#
#   tests/corpus/kaldi_expected/swbd300/regenerate.sh KALDI_GIT_DIR [PYTHON]
#
# KALDI_GIT_DIR: a clone of https://github.com/kaldi-asr/kaldi (bare or not; HEAD is used).
# PYTHON: an interpreter that imports this repository's tests package (numpy, asrdist's deps);
# Kaldi's own python scripts run with the python3 on PATH.
#
# Stand-ins, where s5c needs a Kaldi binary or data a fixture cannot have (see README.md):
#   stage 0: data/local/train/swb_ms98_transcriptions is a link to the fixture's MS98 tree;
#   stage 1: `patch <local/dict.patch` is a no-op (the patch fits only the full MS98 lexicon);
#   sph2pipe and sox are empty executables (their names only go into wav.scp);
#   stage 7: make_mfcc.sh is replaced by the segment checks of extract-segments (featbin/
#     extract-segments.cc: start within [0, len], end <= len + 0.5 (then clipped to len),
#     end - start >= 0.1 as a float) in awk, writing a feats.scp of the utterances that would
#     get features; then s5c's own utils/fix_data_dir.sh runs as in run.sh;
#   stage 8: train_dev is the first 100 utterances, not 4000 (the fixture has ~2400).
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,9p' "$0"; exit 1; }
kaldi_git=$(cd "$1" && pwd)
python=${2:-python3}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
# tests/recipes/kaldi_made/regenerate.sh runs this script on the recipes' tree with its sizes
maker=${TREE:-make_prep_tree}
out=${OUT:-$here}
dev_utts=${DEV_UTTS:-100}
max_dup=${MAX_DUP:-300}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$here/../standins.sh"
commit=$(kaldi_tree "$kaldi_git" "$work" egs/swbd/s5c)
make_tree "$repo" "$python" "$work/ldc" "$maker"
ldc=$work/ldc

cd "$work/egs/swbd/s5c"
export PATH="$work/bin:$PATH"
. ./path.sh  # KALDI_ROOT=../../.., LC_ALL=C

# stage 0 (swbd1_data_download.sh): the transcripts are where it would link them
mkdir -p data/local/train
ln -s "$ldc/swb_ms98_transcriptions" data/local/train/swb_ms98_transcriptions
# stage 1
local/swbd1_prepare_dict.sh
# stage 2
local/swbd1_data_prep.sh "$ldc/LDC97S62"
# stage 5: ends with "expected 80 lines in wav.scp" on a 2-conversation fixture, after
# data/eval2000 is written and fixed
if local/eval2000_data_prep.sh "$ldc/LDC2002S09/hub5e_00" "$ldc/LDC2002T43" > eval2000.log 2>&1
then echo "eval2000_data_prep.sh: expected its 80-recordings check to fail"; exit 1
else grep -q "expected 80 lines in wav.scp, got 4" eval2000.log || { cat eval2000.log; exit 1; }
fi

# make_mfcc.sh's extract-segments checks (stand-in), then utils/fix_data_dir.sh; $2: lengths
make_feats() {
  extract_segments "$1" "$2"
  utils/fix_data_dir.sh "$1"
}

# stage 7
for x in train eval2000; do
  reco_len data/$x > data/$x/reco_len
  make_feats data/$x data/$x/reco_len
  rm data/$x/reco_len
done

# stage 8 (4000 -> $dev_utts)
utils/subset_data_dir.sh --first data/train $dev_utts data/train_dev
n=$(( $(wc -l < data/train/segments) - dev_utts ))
utils/subset_data_dir.sh --last data/train $n data/train_nodev
utils/data/remove_dup_utts.sh $max_dup data/train_nodev data/train_nodup

# local/nnet3/run_ivector_common.sh stage 1: speed perturbation, features, fix_data_dir.sh.
# get_reco2dur.sh would run wav-to-duration: its reco2dur is written first from the headers
# (stand-in); the perturbed copies' lengths are the reco2dur perturb_data_dir_speed.sh writes
# for them (the source's divided by the factor; sox's output is within a sample of it).
rm -f data/train_nodup/feats.scp
reco_len data/train_nodup > data/train_nodup/reco2dur
utils/data/perturb_data_dir_speed_3way.sh --always-include-prefix true \
  data/train_nodup data/train_nodup_sp
make_feats data/train_nodup_sp data/train_nodup_sp/reco2dur

keep_dirs "$out" train train_dev train_nodup train_nodup_sp eval2000
cp data/local/dict_nosp/acronyms.map "$out/acronyms.map"
echo "$commit" > "$out/KALDI_COMMIT"
echo "regenerated from kaldi-asr/kaldi $commit"
