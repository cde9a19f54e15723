#!/usr/bin/env bash
# Kaldi's reading of the compressed scores asrdist-compute-loglikes writes (Kaldi f4007661's
# copy-matrix, built by ../shared/tools/build-kaldi.sh). From the repository root:
#   KALDI_BIN=/path/to/kaldi/bin tests/decode/kaldi_expected/compressed/make_expected.sh
set -euo pipefail
here=tests/decode/kaldi_expected/compressed
python "$here/make_scores.py" "$here/scores.ark"
"$KALDI_BIN/copy-matrix" "ark:$here/scores.ark" "ark,t:$here/kaldi_read.txt"
