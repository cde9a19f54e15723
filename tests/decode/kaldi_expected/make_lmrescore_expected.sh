#!/usr/bin/env bash
# Remakes the LM-rescoring tests' expected outputs with Kaldi's own binaries (built by
# ../shared/tools/build-kaldi.sh) and Kaldi's utils/map_arpa_lm.pl, from lat.1.bin (see
# make_expected.sh), tg.arpa and oov.int (make_lm_inputs.py) and the hand-written fg.arpa.
# Usage, from this folder:
#   PATH=<kaldi-lite prefix>/bin:$PATH MAP_ARPA_LM=<kaldi>/egs/wsj/s5/utils/map_arpa_lm.pl \
#     bash make_lmrescore_expected.sh
set -euo pipefail
export OPENBLAS_NUM_THREADS=1
: "${MAP_ARPA_LM:?set MAP_ARPA_LM to egs/wsj/s5/utils/map_arpa_lm.pl of Kaldi}"
# the old LM, as the lang's G.fst (utils/format_lm.sh's arpa2fst call)
arpa2fst --disambig-symbol=#0 --read-symbol-table=words.txt tg.arpa G.fst 2> lmrescore.log
# the new LM, as utils/build_const_arpa_lm.sh makes G.carpa
bos=$(awk '$1 == "<s>" {print $2}' words.txt)
eos=$(awk '$1 == "</s>" {print $2}' words.txt)
arpa-to-const-arpa --bos-symbol=$bos --eos-symbol=$eos --unk-symbol=$(cat oov.int) \
  "perl $MAP_ARPA_LM words.txt < fg.arpa |" G.carpa 2>> lmrescore.log
# steps/lmrescore_const_arpa.sh's pipeline (it writes ark,t; binary keeps the exact floats),
# and its first half alone; its "fstproject --project_output=true" is spelled
# --project_type=output by Debian's OpenFst 1.7.9
lattice-lmrescore --lm-scale=-1.0 ark:lat.1.bin "fstproject --project_type=output G.fst |" \
  ark:removed.1.bin 2>> lmrescore.log
lattice-lmrescore-const-arpa --lm-scale=1.0 ark:removed.1.bin G.carpa ark:rescored.1.bin \
  2>> lmrescore.log
lattice-copy ark:rescored.1.bin ark,t:rescored.1.txt 2>> lmrescore.log
# the best paths of the rescored lattices at a few points of local/score_sclite.sh's sweep
for lmwt in 5 9 13 17; do
  for wip in 0.0 0.5 1.0; do
    lattice-scale --inv-acoustic-scale=$lmwt ark:rescored.1.bin ark:- 2>/dev/null \
      | lattice-add-penalty --word-ins-penalty=$wip ark:- ark:- 2>/dev/null \
      | lattice-best-path ark:- ark,t:- 2>/dev/null | sed "s/^/$lmwt $wip /"
  done
done > rescored_sweep.txt
# their word times, as score_sclite.sh's CTMs: LMWT WIP utt channel start duration word-id
for lmwt in 5 9 13 17; do
  for wip in 0.0 0.5 1.0; do
    lattice-scale --inv-acoustic-scale=$lmwt ark:rescored.1.bin ark:- 2>/dev/null \
      | lattice-add-penalty --word-ins-penalty=$wip ark:- ark:- 2>/dev/null \
      | lattice-1best ark:- ark:- 2>/dev/null \
      | lattice-align-words-lexicon phones/align_lexicon.int final.mdl ark:- ark:- 2>/dev/null \
      | nbest-to-ctm ark:- - 2>/dev/null | sed "s/^/$lmwt $wip /"
  done
done > rescored_sweep_ctm.txt
