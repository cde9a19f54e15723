#!/usr/bin/env bash
# Remakes the Kaldi data dirs in this folder by running Kaldi's own egs/fisher_swbd/s5 scripts
# (run.sh's data preparation up to data/train_nodup, and stage 1 of
# local/nnet3/run_ivector_common.sh) on the fixture tree of
# tests.corpus.ldc_fixture.make_prep_tree (Switchboard-1 + MS98, eval2000, Fisher p1 + p2);
# then local/fisher_swbd_prepare_dict.sh and local/swbd1_data_prep.sh once more with the MS98
# lexicon's upper-case "I" line removed (lexicon_without_I/).
# Nothing here comes from asrdist's data prep: asrdist only writes the fixture's input files.
#
#   tests/corpus/kaldi_expected/swbd2000/regenerate.sh KALDI_GIT_DIR [PYTHON]
#
# KALDI_GIT_DIR: a clone of https://github.com/kaldi-asr/kaldi (bare or not; HEAD is used).
# PYTHON: an interpreter that imports this repository's tests package (numpy, asrdist's deps);
# Kaldi's own python scripts run with the python3 on PATH.
#
# Stand-ins, where fisher_swbd needs a Kaldi binary, the network or data a fixture cannot have
# (see README.md):
#   fisher_data_prep.sh stage 0 ends with its check of 11699 transcripts (the fixture has 7),
#     after writing its file lists; the script checks that this is how it failed, then runs
#     the script again from stage 1, as its --stage option allows;
#   swbd1_data_download.sh: data/local/train_swbd/swb_ms98_transcriptions is a link to the
#     fixture's MS98 tree;
#   fisher_swbd_prepare_dict.sh: `svn co` of the CMU dictionary fails (no network; the
#     dictionary is not part of any data dir) and `patch <local/dict.patch` is a no-op (the
#     patch fits only the full MS98 lexicon); the script's SWBD half still makes
#     acronyms_swbd.map, which swbd1_data_prep.sh uses and which is checked to exist;
#   sph2pipe and sox are empty executables (their names only go into wav.scp);
#   steps/make_mfcc.sh is replaced by the segment checks of extract-segments (featbin/
#     extract-segments.cc: start within [0, len], end <= len + 0.5 (then clipped to len),
#     end - start >= 0.1 as a float) in awk, writing a feats.scp of the utterances that would
#     get features; then fisher_swbd's own utils/fix_data_dir.sh runs as in run.sh.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,14p' "$0"; exit 1; }
kaldi_git=$(cd "$1" && pwd)
python=${2:-python3}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
# tests/recipes/kaldi_made/regenerate.sh runs this script on the recipes' tree with its sizes
maker=${TREE:-make_prep_tree}
out=${OUT:-$here}
max_dup=${MAX_DUP:-300}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$here/../standins.sh"
commit=$(kaldi_tree "$kaldi_git" "$work" egs/fisher_swbd/s5)
printf '#!/bin/sh\necho "svn: no network (stand-in)" >&2\nexit 1\n' > "$work/bin/svn"
chmod +x "$work/bin/svn"
make_tree "$repo" "$python" "$work/ldc" "$maker"
ldc=$work/ldc
if [ "$maker" = make_ldc_tree ]; then
  # the recipes' tree has one Fisher call, in fe_03_p1_sph1: the other discs of both releases,
  # which fisher_data_prep.sh links one by one, are there empty
  mkdir -p "$ldc"/LDC2004S13/fe_03_p1_sph{2..7} "$ldc"/LDC2005S13/fe_03_p2_sph{1..7} \
    "$ldc/LDC2005T19/fe_03_p2_tran/data/trans"
fi

cd "$work/egs/fisher_swbd/s5"
export PATH="$work/bin:$PATH"
. ./path.sh  # KALDI_ROOT=../../.., LC_ALL=C

# run.sh: local/fisher_data_prep.sh with the four releases. Stage 0 stops at its 11699 check
# after writing transcripts.flist and sph.flist; the rest runs from stage 1.
fisher_dirs="$ldc/LDC2004T19 $ldc/LDC2005T19 $ldc/LDC2004S13 $ldc/LDC2005S13"
if local/fisher_data_prep.sh $fisher_dirs > fisher_data_prep.log 2>&1
then echo "fisher_data_prep.sh: expected its 11699-files check to fail"; exit 1
else grep -q "Expected to find 11699 transcript files in the Fisher data, found [0-9]*$" \
       fisher_data_prep.log || { cat fisher_data_prep.log; exit 1; }
fi
local/fisher_data_prep.sh --stage 1 $fisher_dirs

# run.sh: local/swbd1_data_download.sh (stand-in: the transcripts are where it links them)
mkdir -p data/local/train_swbd
ln -s "$ldc/swb_ms98_transcriptions" data/local/train_swbd/swb_ms98_transcriptions
# run.sh: local/fisher_swbd_prepare_dict.sh (fails at the CMU dictionary, see above)
local/fisher_swbd_prepare_dict.sh > prepare_dict.log 2>&1 || true
[ -s data/local/dict_nosp/acronyms_swbd.map ] || { cat prepare_dict.log; exit 1; }
# run.sh: local/swbd1_data_prep.sh
local/swbd1_data_prep.sh "$ldc/LDC97S62"

# run.sh: merge the two into data/train_all
mkdir -p data/train_all
for f in spk2utt utt2spk wav.scp text segments reco2file_and_channel; do
  cat data/train_fisher/$f data/train_swbd/$f > data/train_all/$f
done

# run.sh: local/eval2000_data_prep.sh (fisher_swbd's copy: no extend_segments.pl)
local/eval2000_data_prep.sh "$ldc/LDC2002S09/hub5e_00" "$ldc/LDC2002T43"

# run.sh: fix_data_dir.sh, make_mfcc.sh, fix_data_dir.sh on train_all; then on eval2000
utils/fix_data_dir.sh data/train_all
reco_len data/train_all > data/train_all/reco_len
extract_segments data/train_all data/train_all/reco_len
rm data/train_all/reco_len
utils/fix_data_dir.sh data/train_all
utils/fix_data_dir.sh data/eval2000
reco_len data/eval2000 > data/eval2000/reco_len
extract_segments data/eval2000 data/eval2000/reco_len
rm data/eval2000/reco_len
utils/fix_data_dir.sh data/eval2000
utils/fix_data_dir.sh data/eval2000

# run.sh: the Switchboard part back into train_swbd, then train and train_nodup
awk -F , '{print $1}' data/train_swbd/spk2utt > data/swbd_spklist
utils/subset_data_dir.sh --spk-list data/swbd_spklist data/train_all data/train_swbd
n=$(wc -l < data/train_all/segments)
utils/subset_data_dir.sh --last data/train_all $n data/train
utils/data/remove_dup_utts.sh $max_dup data/train data/train_nodup

# local/nnet3/run_ivector_common.sh stage 1: speed perturbation (no --always-include-prefix:
# the 1.0 copy keeps its ids), features, fix_data_dir.sh. get_reco2dur.sh would run
# wav-to-duration: its reco2dur is written first from the headers (stand-in); the perturbed
# copies' lengths are the reco2dur perturb_data_dir_speed.sh writes for them (the source's
# divided by the factor; sox's output is within a sample of it).
rm -f data/train_nodup/feats.scp
reco_len data/train_nodup > data/train_nodup/reco2dur
utils/data/perturb_data_dir_speed_3way.sh data/train_nodup data/train_nodup_sp
extract_segments data/train_nodup_sp data/train_nodup_sp/reco2dur
utils/fix_data_dir.sh data/train_nodup_sp

keep_dirs "$out" train_fisher train_swbd train train_nodup train_nodup_sp eval2000
cp data/local/dict_nosp/acronyms_swbd.map "$out/acronyms_swbd.map"

[ "$out" = "$here" ] || { echo "$commit" > "$out/KALDI_COMMIT"; exit 0; }

# Again with the MS98 lexicon in lower case alone (its "I ay" line removed, as the real lexicon
# has no upper-case I): map_acronyms_transcripts.py stops at `del dict_acronym_noi['I']` and
# swbd1_data_prep.sh keeps the text as swbd1_map_words.pl left it. Kept: that data/train_swbd's
# text, as swbd1_data_prep.sh writes it (before run.sh's fixes).
lexicon=data/local/train_swbd/swb_ms98_transcriptions/sw-ms98-dict.text
rm data/local/train_swbd/swb_ms98_transcriptions
mkdir data/local/train_swbd/swb_ms98_transcriptions
cp -r "$ldc"/swb_ms98_transcriptions/* data/local/train_swbd/swb_ms98_transcriptions/
grep -v '^I ay$' "$ldc/swb_ms98_transcriptions/sw-ms98-dict.text" > $lexicon
rm -r data/local/dict_nosp
local/fisher_swbd_prepare_dict.sh > prepare_dict.log 2>&1 || true
local/swbd1_data_prep.sh "$ldc/LDC97S62" > swbd1_data_prep.log 2>&1
grep -q "KeyError: 'I'" swbd1_data_prep.log || { cat swbd1_data_prep.log; exit 1; }
mkdir -p "$here/lexicon_without_I/train_swbd"
cp data/train_swbd/text "$here/lexicon_without_I/train_swbd/text"
echo "$commit" > "$out/KALDI_COMMIT"
echo "regenerated from kaldi-asr/kaldi $commit"
