#!/usr/bin/env bash
# Remakes the user's Kaldi data dirs of the recipes' end-to-end tests: Kaldi's own s5c
# (swbd300/) and fisher_swbd s5 (swbd2000/) data preparation run on the miniature LDC tree of
# tests.corpus.ldc_fixture.make_ldc_tree, by the scripts of tests/corpus/kaldi_expected (same
# stand-ins, see their README.md), with the test's sizes: train_dev of 4 utterances and a
# duplicate cap of 2. wav.scp is kept, its paths written as @LDC@ and @KALDI_ROOT@.
#
#   tests/recipes/kaldi_made/regenerate.sh KALDI_GIT_DIR [PYTHON]
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,8p' "$0"; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
expected=$here/../../corpus/kaldi_expected
export TREE=make_ldc_tree MAX_DUP=2 DEV_UTTS=4 KEEP_WAV=yes
OUT=$here/swbd300 "$expected/swbd300/regenerate.sh" "$@"
OUT=$here/swbd2000 "$expected/swbd2000/regenerate.sh" "$@"
