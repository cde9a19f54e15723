#!/usr/bin/env bash
# Remakes this folder's expected outputs with Kaldi's own binaries (built by
# ../shared/tools/build-kaldi.sh), from the inputs make_inputs.py wrote.
# Usage, from this folder:  PATH=<kaldi-lite prefix>/bin:$PATH bash make_expected.sh
set -euo pipefail
export OPENBLAS_NUM_THREADS=1
# steps/nnet3/decode.sh's defaults (post-decode-acwt 1.0 adds no lattice-scale step)
latgen-faster-mapped --minimize=false --max-active=7000 --min-active=200 --beam=15.0 \
  --lattice-beam=8.0 --acoustic-scale=0.1 --allow-partial=true --word-symbol-table=words.txt \
  final.mdl HCLG.fst ark:loglikes.ark "ark:|gzip -c > lat.1.gz" 2> latgen.log
lattice-copy "ark:gunzip -c lat.1.gz|" ark,t:lat.1.txt 2>> latgen.log
gunzip -c lat.1.gz > lat.1.bin
rm lat.1.gz
# local/score_sclite.sh's sweep: LMWT 5..17 x WIP 0.0 0.5 1.0, best path per point
for lmwt in $(seq 5 17); do
  for wip in 0.0 0.5 1.0; do
    lattice-scale --inv-acoustic-scale=$lmwt ark:lat.1.bin ark:- 2>/dev/null \
      | lattice-add-penalty --word-ins-penalty=$wip ark:- ark:- 2>/dev/null \
      | lattice-best-path ark:- ark,t:- 2>/dev/null | sed "s/^/$lmwt $wip /"
  done
done > sweep.txt
# the sweep's word times, as score_sclite.sh's CTMs (1-best, lexicon word alignment):
# LMWT WIP utt channel start duration word-id per line
for lmwt in $(seq 5 17); do
  for wip in 0.0 0.5 1.0; do
    lattice-scale --inv-acoustic-scale=$lmwt ark:lat.1.bin ark:- 2>/dev/null \
      | lattice-add-penalty --word-ins-penalty=$wip ark:- ark:- 2>/dev/null \
      | lattice-1best ark:- ark:- 2>/dev/null \
      | lattice-align-words-lexicon phones/align_lexicon.int final.mdl ark:- ark:- 2>/dev/null \
      | nbest-to-ctm ark:- - 2>/dev/null | sed "s/^/$lmwt $wip /"
  done
done > sweep_ctm.txt
