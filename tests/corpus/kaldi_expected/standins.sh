# Sourced by swbd300/regenerate.sh and swbd2000/regenerate.sh: the stand-ins for what Kaldi's
# data preparation needs beyond bash, perl, awk and python (see their README.md files).

# kaldi_tree KALDI_GIT_DIR WORK EGS_DIR: Kaldi's EGS_DIR, utils and steps (HEAD) under WORK,
# with empty sph2pipe and sox (their names only go into wav.scp), a no-op patch (dict.patch
# fits only the full MS98 lexicon) and python -> python3; prints the commit.
kaldi_tree() {
  local git=$1 work=$2
  git --git-dir="$git/.git" rev-parse HEAD >/dev/null 2>&1 && git=$git/.git
  git --git-dir="$git" archive HEAD "$3" egs/wsj/s5/utils egs/wsj/s5/steps | tar -x -C "$work"
  mkdir -p "$work/tools/config" "$work/tools/sph2pipe_v2.5" "$work/bin"
  : > "$work/tools/config/common_path.sh"
  printf '#!/bin/sh\nexit 1\n' > "$work/tools/sph2pipe_v2.5/sph2pipe"
  cp "$work/tools/sph2pipe_v2.5/sph2pipe" "$work/bin/sox"  # perturb_data_dir_speed.sh checks it
  printf '#!/bin/sh\ncat >/dev/null\n' > "$work/bin/patch"
  ln -s "$(command -v python3)" "$work/bin/python"
  chmod +x "$work/tools/sph2pipe_v2.5/sph2pipe" "$work/bin/patch" "$work/bin/sox"
  git --git-dir="$git" rev-parse HEAD
}

# make_tree REPO PYTHON DIR [MAKER]: a fixture tree, by tests.corpus.ldc_fixture's MAKER
# (make_prep_tree, the default; make_ldc_tree for the recipes' end-to-end tests).
make_tree() {
  (cd "$1" && PYTHONPATH="$1" "$2" -c \
    "import sys; from pathlib import Path; from tests.corpus import ldc_fixture;
getattr(ldc_fixture, sys.argv[2])(Path(sys.argv[1]))" "$3" "${4:-make_prep_tree}")
}

# reco_len DATA_DIR: recording lengths (seconds) from the SPHERE headers of its wav.scp.
reco_len() {
  awk '{print $1, $(NF-1)}' "$1/wav.scp" | while read -r reco sph; do
    head -c 1024 "$sph" | tr -d '\0' | awk -v r="$reco" \
      '$1 == "sample_count" {n = $3} $1 == "sample_rate" {f = $3} END {print r, n / f}'
  done
}

# extract_segments DATA_DIR LENGTHS: in place of steps/make_mfcc.sh, the checks of its
# extract-segments (start within [0, len], end <= len + 0.5 then clipped, end - start >= 0.1
# in float), writing a feats.scp of the utterances that would get features.
extract_segments() {
  awk -v min=0.100000001490116119384765625 'NR == FNR {len[$1] = $2; next}
    {s = $3 + 0; e = $4 + 0; l = len[$2];
     if (s < 0 || e <= 0 || s >= e || s > l || e > l + 0.5) next;
     if (e > l) e = l;
     if (e - s < min) next;
     print $1, "feats.ark:" NR}' "$2" "$1/segments" > "$1/feats.scp"
}

# keep_dirs DEST NAME...: the compared files of data/NAME into DEST/NAME. With KEEP_WAV set,
# wav.scp too, this machine's paths written as @LDC@ (the fixture's root, $ldc)
# and @KALDI_ROOT@ (where the recipe's path.sh puts Kaldi: its sph2pipe is
# @KALDI_ROOT@/tools/sph2pipe_v2.5/sph2pipe), for the test to put its own in.
keep_dirs() {
  local dest=$1 x f
  shift
  for x in "$@"; do
    rm -rf "${dest:?}/$x"
    mkdir -p "$dest/$x"
    for f in text segments utt2spk spk2utt reco2file_and_channel stm glm; do
      [ -f "data/$x/$f" ] && cp "data/$x/$f" "$dest/$x/$f"
    done
    if [ -n "${KEEP_WAV:-}" ]; then
      sed -e "s|$KALDI_ROOT|@KALDI_ROOT@|g" -e "s|$ldc|@LDC@|g" "data/$x/wav.scp" \
        > "$dest/$x/wav.scp"
    fi
  done
}
