#!/usr/bin/env bash
# Regenerates the expected ctm files of tests/score/test_acronyms.py with Kaldi's own
# scripts (kaldi-asr/kaldi at the commit in tests/corpus/kaldi_expected/swbd300/KALDI_COMMIT):
#   tests/score/kaldi_acronyms/regenerate.sh KALDI_GIT_DIR [PYTHON]
# s5c.ctm: egs/swbd/s5c/local/map_acronyms_ctm.py with the Kaldi-made s5c acronyms.map of
# tests/corpus/kaldi_expected/swbd300; fisher_swbd.ctm:
# egs/fisher_swbd/s5/local/format_acronyms_ctm_eval2000.py (it takes no map).
set -euo pipefail
kaldi=$1 python=${2:-python3}
here=$(cd "$(dirname "$0")" && pwd)
commit=$(cat "$here/../../corpus/kaldi_expected/swbd300/KALDI_COMMIT")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
git --git-dir="$kaldi" show "$commit:egs/swbd/s5c/local/map_acronyms_ctm.py" > "$tmp/s5c.py"
git --git-dir="$kaldi" show "$commit:egs/fisher_swbd/s5/local/format_acronyms_ctm_eval2000.py" \
  > "$tmp/fisher.py"
"$python" "$tmp/s5c.py" -i "$here/hyp.ctm" -o "$here/s5c.ctm" \
  -M "$here/../../corpus/kaldi_expected/swbd300/acronyms.map"
"$python" "$tmp/fisher.py" -i "$here/hyp.ctm" -o "$here/fisher_swbd.ctm"
