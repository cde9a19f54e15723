#!/usr/bin/env bash
# Kaldi's own lattice posteriors of real lattices, for tests/decode/test_lattice_post_kaldi.py.
# Inputs (made by asrdist, recipes/digits, nicolas held out): final.mdl, the monophone GMM;
# lat.1.gz, asrdist-decode --gmm final.mdl --lmwt 10 --beam 60 --lattice-beam 60 of three
# training clips (george-0-000, jackson-3-010, lucas-7-020) with the one-digit grammar;
# ali.1.gz, the same clips' alignments from asrdist-align-gmm. Phones 1:2 are SIL and SPN.
#   KALDI_BIN=<dir with Kaldi's lattice-to-post and lattice-to-smbr-post> ./make_expected.sh
# (made from Kaldi's src/latbin, ../shared/tools/build-kaldi-gmm.sh with
#  KALDI_EXTRA_BINS=latbin/lattice-to-smbr-post; Kaldi 5.5, the mirror of kaldi-asr/kaldi fetched 2026-12-02)
set -euo pipefail
cd "$(dirname "$0")"
bin=${KALDI_BIN:?set KALDI_BIN to the directory of the Kaldi programs}
lats="ark:gunzip -c lat.1.gz |"
ali="ark:gunzip -c ali.1.gz |"
"$bin/lattice-to-post" --acoustic-scale=0.1 "$lats" ark,t:post.txt 2> lattice-to-post.log
"$bin/lattice-to-smbr-post" --acoustic-scale=0.1 --silence-phones=1:2 final.mdl "$ali" \
  "$lats" ark,t:smbr.txt 2> lattice-to-smbr-post.log
"$bin/lattice-to-smbr-post" --acoustic-scale=0.1 --silence-phones=1:2 --one-silence-class \
  final.mdl "$ali" "$lats" ark,t:smbr_one_silence.txt 2> lattice-to-smbr-post_one.log
sed -i "s|$bin/||g" ./*.log
