#!/usr/bin/env bash
# LJSpeech-1.1 (one reader, real recordings): the Kaldi-style pipeline on real speech.
#   ./run.sh                                   the shared part (../shared/corpora/ljspeech-part)
#   ./run.sh --corpus ~/LJSpeech-1.1           the whole corpus (or --download DIR)
#   ./run.sh --test-corpus "DIR1 DIR2"         more test sets in the publisher's layout, each
#                                              decoded and scored under its dir's name
# The stages (--stage N --stop-stage M runs N..M); each calls one asrdist CLI per system/set,
# and a stage already done with the same options and inputs is skipped:
#   0 data      asrdist-prepare-ljspeech: data/{train,test,NAME}, lexicon, lang, LM text and
#               its trigram and 4-gram (RESULTS.md: split, normalisation, lexicon, OOV, LMs)
#   1 features  16 kHz MFCC (sox resamples in wav.scp); fbank too with --nnet-feats fbank
#   2 GMMs      monophone GMM (asrdist-align-gmm), tri1 on mono's alignments (delta
#               triphones, asrdist-train-deltas), tri2 on tri1's (LDA+MLLT,
#               asrdist-train-lda-mllt); $ali is the system the networks train on (tri2)
#   3 targets   asrdist-ingest-ali: $ali's alignments -> pdf-ids
#   4 train     the --setup network (BLSTM, Conformer or TDNN-F) per --algos, --learners
#               each (local/launch_train.sh)
#   5 graphs    trigram HCLG per GMM system (asrdist-mkgraph over the LM text)
#   6 decode    lattices of every system on every test set (asrdist-decode)
#   7 rescore   the lattices rescored with the 4-gram (asrdist-lmrescore)
#   8 score     asrdist-score: exp/results.md (mini's shape) and exp/RESULTS (best %WER lines)
set -euo pipefail
cd "$(dirname "$0")"
. ./path.sh
. ./cmd.sh
. "$repo_root/local/log.sh"

stage=0
stop_stage=100
corpus="$repo_root/../shared/corpora/ljspeech-part/LJSpeech-1.1"
download=""        # a dir: download the whole corpus there with lhotse (instead of --corpus)
test_corpus=""     # extra test corpora (dirs), space-separated
nj=2               # parallel jobs for features, alignment, decoding
mono_opts=""       # extra asrdist-align-gmm flags, e.g. "--num-iters 40"
tri1_opts="--num-leaves 300 --total-gauss 2000"  # asrdist-train-deltas (RESULTS.md: sizes tried)
tri2_opts="--num-leaves 400 --total-gauss 3000"  # asrdist-train-lda-mllt
setup=blstm        # the network: blstm, conformer or tdnnf (conf/train_SETUP.yaml), per --algos
algos="ssgd"       # distributed strategies trained in stage 4, one run dir each
learners=2         # learner processes per training run (mpiexec, torchrun or srun)
nnet_feats=mfcc    # the networks' input: mfcc (13 cepstra, as the GMM's) or fbank (40 bands)
train_opts=""      # extra asrdist-train flags, e.g. "--epochs 2 --units 64"
decode_opts="--max-active 3000"  # asrdist-decode flags (Kaldi's 7000 made the BLSTM's decode 524 s)
seq_objectives="smbr"  # stage 5: sequence training of each network from its CE model, one run
                   # per objective (mmi, bmmi, smbr; "": none), decoded and scored beside it
seq_opts="--epochs 2 --lr 0.4 --anneal-start 2"  # their asrdist-train flags after the CE run's
denlats_opts="--beam 13 --lattice-beam 7 --max-active 5000"  # the lattices' search (make_denlats.sh's)
den_lm_order=1     # the LM of the lattices' graph: a unigram (a weak LM gives the competitors)
data=data          # where data dirs, features and lang go
exp=exp            # where models, graphs, decodes and results go
help_message="Usage: $0 [--stage N] [--stop-stage M] [--corpus DIR | --download DIR]
       [--test-corpus \"DIR ...\"] [--nj J] [--train-cmd CMD] [--decode-cmd CMD] [--mono-opts \"FLAGS\"]
       [--tri1-opts \"FLAGS\"] [--tri2-opts \"FLAGS\"]
       [--setup blstm|conformer|tdnnf] [--algos \"A B\"] [--learners N] [--nnet-feats mfcc|fbank]
       [--train-opts \"FLAGS\"]
       [--decode-opts \"FLAGS\"] [--seq-objectives \"mmi smbr\"] [--seq-opts \"FLAGS\"]
       [--denlats-opts \"FLAGS\"] [--den-lm-order N] [--data DIR] [--exp DIR]"
. "$repo_root/local/parse_options.sh"
case $nnet_feats in
  mfcc|fbank) ;;
  *) echo "$0: --nnet-feats $nnet_feats: choose mfcc or fbank" >&2; exit 1 ;;
esac
case $setup in
  blstm|conformer|tdnnf) ;;
  *) echo "$0: --setup $setup: choose blstm, conformer or tdnnf" >&2; exit 1 ;;
esac
test_sets="test $(for d in $test_corpus; do basename "$d"; done)"
gmms="mono tri1 tri2"       # GMM systems, each decoded with its own graph
ali=$exp/tri2               # the alignments the networks train on (the best GMM's)
ce_runs=$(for a in $algos; do echo ${setup}_$a; done)
runs=$(for r in $ce_runs; do echo $r; for o in $seq_objectives; do echo ${r}_$o; done; done)
# graph_of SYSTEM: the graph dir a system decodes with (a network: its alignments' GMM's)
graph_of() { case $1 in mono|tri1|tri2) echo $exp/$1/graph_tg ;; *) echo $ali/graph_tg ;; esac; }

if [ $stage -le 0 ] && [ $stop_stage -ge 0 ]; then
  if [ -n "$download" ]; then source_opts=(--download "$download"); else source_opts=(--corpus "$corpus"); fi
  run_stage 0 data asrdist-prepare-ljspeech "${source_opts[@]}" \
    $(for d in $test_corpus; do echo --test-corpus "$d"; done) --out $data
fi

if [ $stage -le 1 ] && [ $stop_stage -ge 1 ]; then
  for part in train $test_sets; do
    run_stage 1 "mfcc $part" asrdist-features --kind mfcc --nj $nj --cmd "$train_cmd" \
      $data/$part $data/${part}_mfcc
    if [ $nnet_feats = fbank ]; then
      run_stage 1 "fbank $part" asrdist-features --kind fbank --nj $nj --cmd "$train_cmd" \
        $data/$part $data/${part}_fbank
    fi
  done
fi

if [ $stage -le 2 ] && [ $stop_stage -ge 2 ]; then
  run_stage 2 "monophone GMM" asrdist-align-gmm --nj $nj $mono_opts $data/train_mfcc \
    $data/lang $exp/mono
  run_stage 2 "tri1 (deltas)" asrdist-train-deltas --nj $nj $tri1_opts $data/train_mfcc \
    $data/lang $exp/mono $exp/tri1
  run_stage 2 "tri2 (LDA+MLLT)" asrdist-train-lda-mllt --nj $nj $tri2_opts $data/train_mfcc \
    $data/lang $exp/tri1 $exp/tri2
fi

if [ $stage -le 3 ] && [ $stop_stage -ge 3 ]; then
  run_stage 3 ingestion asrdist-ingest-ali $ali $data/train_$nnet_feats/feats.scp ${ali}_pdf
fi

if [ $stage -le 4 ] && [ $stop_stage -ge 4 ]; then
  for a in $algos; do
    run_stage 4 "train $a x$learners" "$repo_root/local/launch_train.sh" --learners $learners -- \
      --config conf/train_$setup.yaml --data $data/train_$nnet_feats --targets ${ali}_pdf \
      --out $exp/${setup}_$a --algo $a --resume $train_opts
  done
fi

if [ $stage -le 5 ] && [ $stop_stage -ge 5 ]; then
  for g in $gmms; do  # the trigram is estimated here from stage 0's LM text (same as lm_tg.arpa)
    run_stage 5 "graph $g" asrdist-mkgraph --lang $data/lang --model $exp/$g/final.mdl \
      --text $data/local/lm/text --order 3 --out $exp/$g/graph_tg
  done
  # sequence training (make_denlats.sh, then train_discriminative.sh), after the graphs: each
  # CE network's lattices of its training data over a weak LM's graph, then each objective
  silence=$(cat $data/lang/phones/silence.csl)
  if [ -n "$seq_objectives" ]; then
    run_stage 5 "denominator graph" asrdist-mkgraph --lang $data/lang --model $ali/final.mdl \
      --text $data/local/lm/text --order $den_lm_order --out $ali/graph_den
  fi
  for a in $([ -n "$seq_objectives" ] && echo $algos); do
    r=${setup}_$a
    run_stage 5 "denlats $r" asrdist-decode --graph $ali/graph_den --nj $nj \
      --cmd "$decode_cmd" $denlats_opts --lmwt "" --model $exp/$r/final.pt \
      --data $data/train_$nnet_feats --out $exp/${r}_denlats
    for o in $seq_objectives; do
      run_stage 5 "train $r $o x$learners" "$repo_root/local/launch_train.sh" \
        --learners $learners -- --config conf/train_$setup.yaml --data $data/train_$nnet_feats \
        --targets ${ali}_pdf --out $exp/${r}_$o --algo $a --resume $train_opts \
        --objective $o --init-model $exp/$r/final.pt --denlats $exp/${r}_denlats \
        --alignments $ali $([ $o = mmi ] || echo --silence-phones $silence) --feature-masks 0 \
        --time-masks 0 --warmup-epochs 0 $seq_opts
    done
  done
fi

if [ $stage -le 6 ] && [ $stop_stage -ge 6 ]; then
  for s in $test_sets; do
    for g in $gmms; do
      run_stage 6 "decode $g $s" asrdist-decode --graph $(graph_of $g) --nj $nj \
        --cmd "$decode_cmd" $decode_opts --gmm $exp/$g/final.mdl --data $data/${s}_mfcc \
        --out $exp/$g/decode_tg_$s
    done
    for r in $runs; do
      run_stage 6 "decode $r $s" asrdist-decode --graph $(graph_of $r) --nj $nj \
        --cmd "$decode_cmd" $decode_opts --model $exp/$r/final.pt --data $data/${s}_$nnet_feats \
        --out $exp/$r/decode_tg_$s
    done
  done
fi

if [ $stage -le 7 ] && [ $stop_stage -ge 7 ]; then
  for s in $test_sets; do
    for sys in $gmms $runs; do
      run_stage 7 "rescore $sys $s" asrdist-lmrescore --cmd "$decode_cmd" $(graph_of $sys) \
        $data/local/lm/lm_fg.arpa $data/$s $exp/$sys/decode_tg_$s $exp/$sys/decode_fg_$s
    done
  done
fi

if [ $stage -le 8 ] && [ $stop_stage -ge 8 ]; then
  rm -f $exp/results.md $exp/results.json $exp/RESULTS  # the systems scored by this run
  for s in $test_sets; do
    for sys in $gmms $runs; do
      name=$sys; case $sys in mono|tri1|tri2) ;; *) name="$sys x$learners" ;; esac
      for lm in tg fg; do
        run_stage 8 "score $sys $lm $s" asrdist-score text --report $exp/results.md \
          --name "$name $lm $s" $data/$s/text $exp/$sys/decode_${lm}_$s
        echo "$(cat $exp/$sys/decode_${lm}_$s/best_wer)" >> $exp/RESULTS
      done
    done
  done
  cat $exp/results.md $exp/RESULTS
fi
