#!/usr/bin/env bash
# Kaldi's own build-tree on the inputs make_inputs.py wrote: tree (binary) and build-tree.log
# are the expected outputs of tests/gmm/test_build_tree_kaldi.py.
#   KALDI_BIN=<dir with Kaldi's build-tree and compile-questions> ./make_expected.sh
# (made here from Kaldi f4007661's src/bin/{build-tree,compile-questions}.cc, linked against the
# base, matrix, util, tree and hmm libraries of ../shared/tools/build-kaldi-gmm.sh's build)
set -euo pipefail
cd "$(dirname "$0")"
bin=${KALDI_BIN:?set KALDI_BIN to the directory of the Kaldi programs}
"$bin/compile-questions" topo questions.int questions.qst
"$bin/build-tree" --verbose=1 --max-leaves=40 treeacc.txt roots.int questions.qst topo tree \
  2>&1 | sed "s|$bin/||" > build-tree.log
rm questions.qst
