#!/usr/bin/env bash
# Kaldi's own GMM recipe on this recipe's data, for the comparison in RESULTS.md: the same
# clips, split, lexicon and one-digit grammar (stage 0's data/), Kaldi's 8 kHz MFCC, then
# steps/train_mono.sh, train_deltas.sh (tri1), train_lda_mllt.sh (tri2b), train_sat.sh (tri3b),
# each decoded (decode_fmllr.sh for tri3b) and scored by steps/score_kaldi.sh, whose sweep
# over LM weights picks each system's best point on the test set itself (as Kaldi reports).
#   local/kaldi_gmm.sh [--kaldi PREFIX] [--data data] [--work exp_kaldi] [--tests "test"]
# PREFIX is ../shared/tools/build-kaldi-gmm.sh's install (programs, utils/, steps/).
set -euo pipefail
cd "$(dirname "$0")/.."

kaldi=/opt/kaldi-gmm
data=data            # run.sh's --data after its stage 0 (train/, test sets, local/dict)
work=exp_kaldi       # Kaldi's data/, exp/ and logs go here
tests="test"         # data dirs decoded, space-separated
nj=2
mono_gauss=1000      # train_mono.sh's default
tri1="100 1000"      # leaves and Gaussians of tri1, tri2b and tri3b: ten words, few contexts
tri2="100 1000"
tri3="100 1000"
. ../../local/parse_options.sh

data=$(cd "$data" && pwd)
mkdir -p "$work" && cd "$work"
ln -sfn "$kaldi/egs-wsj-s5/utils" utils
ln -sfn "$kaldi/egs-wsj-s5/steps" steps
mkdir -p local conf
ln -sfn ../steps/score_kaldi.sh local/score.sh
echo ". $kaldi/path.sh" > path.sh  # Kaldi's scripts source ./path.sh
. ./path.sh
echo "--sample-frequency=8000" > conf/mfcc.conf
echo "--use-energy=false" >> conf/mfcc.conf

jobs_for() { echo $(( $(wc -l < "$1/spk2utt") < nj ? $(wc -l < "$1/spk2utt") : nj )); }

utils/prepare_lang.sh "$data/local/dict" "<unk>" data/local/lang_tmp data/lang
rm -rf data/lang_test && cp -r data/lang data/lang_test
fstcompile --isymbols=data/lang/words.txt --osymbols=data/lang/words.txt \
  "$data/local/grammar.txt" | fstarcsort --sort_type=ilabel > data/lang_test/G.fst

for part in train $tests; do
  rm -rf "data/$part" && mkdir -p "data/$part"
  cp "$data/$part"/{wav.scp,text,utt2spk,spk2utt} "data/$part/"
  steps/make_mfcc.sh --nj "$(jobs_for "data/$part")" --mfcc-config conf/mfcc.conf \
    "data/$part" "exp/make_mfcc/$part" mfcc
  steps/compute_cmvn_stats.sh "data/$part" "exp/make_mfcc/$part" mfcc
done

train_nj=$(jobs_for data/train)
steps/train_mono.sh --nj "$train_nj" --totgauss "$mono_gauss" data/train data/lang exp/mono
steps/align_si.sh --nj "$train_nj" data/train data/lang exp/mono exp/mono_ali
steps/train_deltas.sh $tri1 data/train data/lang exp/mono_ali exp/tri1
steps/align_si.sh --nj "$train_nj" data/train data/lang exp/tri1 exp/tri1_ali
steps/train_lda_mllt.sh $tri2 data/train data/lang exp/tri1_ali exp/tri2b
steps/align_si.sh --nj "$train_nj" data/train data/lang exp/tri2b exp/tri2b_ali
steps/train_sat.sh $tri3 data/train data/lang exp/tri2b_ali exp/tri3b

rm -f RESULTS
for sys in mono tri1 tri2b tri3b; do
  utils/mkgraph.sh data/lang_test "exp/$sys" "exp/$sys/graph"
  for t in $tests; do
    decode=steps/decode.sh
    [ $sys = tri3b ] && decode=steps/decode_fmllr.sh
    $decode --nj "$(jobs_for "data/$t")" "exp/$sys/graph" "data/$t" "exp/$sys/decode_$t"
    echo "$sys $t $(grep -h WER "exp/$sys/decode_$t"/wer_* | utils/best_wer.sh)" | tee -a RESULTS
  done
done
