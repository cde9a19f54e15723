#!/usr/bin/env bash
# Kaldi's own convert-ali on a monophone system's alignments (mono.mdl, mono_ali.1.gz) for a
# triphone system (tri1.mdl, tri1.tree), both trained by asrdist on the coarticulated synthetic
# corpus of tests/gmm/synth_corpus.py: expected.ali.gz is what tests/gmm/test_tied_model.py
# compares asrdist's conversion with.
#   KALDI_BIN=<dir with Kaldi's convert-ali> ./make_expected.sh
# (made here from Kaldi f4007661's src/bin/convert-ali.cc, linked against the base, matrix,
# util, tree and hmm libraries of ../shared/tools/build-kaldi-gmm.sh's build)
set -euo pipefail
cd "$(dirname "$0")"
bin=${KALDI_BIN:?set KALDI_BIN to the directory of the Kaldi programs}
"$bin/convert-ali" mono.mdl tri1.mdl tri1.tree "ark:gunzip -c mono_ali.1.gz |" \
  "ark:| gzip -c -n > expected.ali.gz" 2>&1 | sed "s|$bin/||" > convert-ali.log
# Tree statistics of the same alignments over 8 utterances' features (feats.ark: asrdist's CMN +
# deltas of the synthetic corpus, first 4 dimensions), silence and noise context-independent:
"$bin/acc-tree-stats" --binary=false --ci-phones=1:2 mono.mdl ark:feats.ark \
  "ark:gunzip -c mono_ali.1.gz |" treeacc.txt 2>&1 | sed "s|$bin/||" > acc-tree-stats.log
# LDA on spliced frames (spliced.ark: asrdist's CMN'd frames, 6 dims, spliced 1 each side) with the
# monophone pdfs as classes, silence and noise weighted 0, all frames (no random pruning):
"$bin/ali-to-post" "ark:gunzip -c mono_ali.1.gz |" ark:- 2> /dev/null \
  | "$bin/weight-silence-post" 0.0 1:2 mono.mdl ark:- ark:- 2> /dev/null \
  | "$bin/acc-lda" --rand-prune=0 mono.mdl ark:spliced.ark ark:- lda.acc 2> /dev/null
"$bin/est-lda" --dim=6 lda.mat lda.acc 2>&1 | sed "s|$bin/||" > est-lda.log
rm lda.acc
