#!/usr/bin/env bash
# The mini recipe: a corpus spoken by espeak-ng and flite, augmented (3-way speed perturbation,
# reverberation, noise), then the whole Kaldi-style pipeline.
#   ./run.sh                       all stages
#   ./run.sh --stage 4 --algos adpsgd-delay1 --learners 4
#   ./run.sh --setup suchen --learners 4  Su & Chen: RBM-pretrained sigmoid DNN, NG-SGD, ma
# Every stage calls one asrdist CLI; a stage already done with the same options and inputs is
# skipped, one whose options or inputs changed is redone (README.md, "The mini recipe").
set -euo pipefail
cd "$(dirname "$0")"
. ./path.sh
. ./cmd.sh
. "$repo_root/local/log.sh"

stage=0
stop_stage=100
hours=0.75         # clean training audio, hours; augmented: about 4x (0.75 -> 3.0 h); try 3.0
test_hours=""      # test audio (voices never seen in training), hours; empty: 20 minutes
augment=true       # true: speed 0.9/1.0/1.1, reverberated and noisy copies; false: clean only
aug_opts=""        # extra asrdist-augment flags, e.g. "--reverb-fraction 1 --snr 0,15"
seed=0
nj=2               # parallel jobs for features, alignment, decoding
algos="ssgd"       # distributed strategies trained in stage 4, one run dir each (e.g. "ssgd adpsgd-random")
learners=2         # learner processes per training run (mpiexec, torchrun or srun)
setup=blstm        # blstm, conformer, tdnnf: that network per --algos (conf/train_SETUP.yaml);
                   # suchen: Su & Chen's setup (conf/train_dnn_suchen.yaml)
nnet_feats=mfcc    # the networks' input: mfcc (13 cepstra, as the GMM's) or fbank (40 mel bands)
gmm=tri1           # the GMM whose alignments the networks learn: tri1 (tied triphones) or mono
tri_opts="--num-leaves 1000 --total-gauss 8000"  # asrdist-train-deltas flags for tri1
train_opts=""      # extra asrdist-train flags, e.g. "--epochs 2 --units 256"
pretrain_opts=""   # suchen: extra asrdist-pretrain-rbm flags (keep --hidden-* as the DNN's)
seq_objectives="smbr"  # stage 8: sequence training of each network from its CE model, one run
                   # per objective (mmi, bmmi, smbr; "": none); RESULTS.md, "Sequence training"
seq_opts="--epochs 2 --lr 0.4 --anneal-start 2"  # their asrdist-train flags after the CE run's
                   # config and flags (no SpecAugment, no warm-up: fixed in stage 8)
decode_opts=""     # extra asrdist-decode flags of the test decodes (stages 6 and 8),
                   # e.g. "--beam 10 --max-active 3000"
denlats_opts="--beam 13 --lattice-beam 7 --max-active 5000"  # the lattices' search (make_denlats.sh's)
den_lm_order=1     # the LM of the lattices' graph: a unigram of the training text (the trigram
                   # of its own sentences leaves ~1.1 arcs per frame: no competitors)
data=data          # where corpus, features and lang go
exp=exp            # where models, decodes and results go
help_message="Usage: $0 [--stage N] [--stop-stage M] [--hours H] [--test-hours H] [--augment true|false]
       [--aug-opts \"FLAGS\"] [--nj J] [--train-cmd CMD] [--decode-cmd CMD] [--algos \"A B\"] [--learners N]
       [--setup blstm|conformer|tdnnf|suchen] [--nnet-feats mfcc|fbank] [--gmm mono|tri1] [--tri-opts \"FLAGS\"]
       [--train-opts \"FLAGS\"] [--pretrain-opts \"FLAGS\"] [--seq-objectives \"mmi smbr\"]
       [--seq-opts \"FLAGS\"] [--decode-opts \"FLAGS\"] [--denlats-opts \"FLAGS\"] [--den-lm-order N]
       [--data DIR] [--exp DIR]"
. "$repo_root/local/parse_options.sh"
case $setup in
  blstm|conformer|tdnnf) runs=$(for a in $algos; do echo ${setup}_$a; done) ;;
  suchen) runs=dnn_suchen_ma ;;
  *) echo "$0: --setup $setup: choose blstm, conformer, tdnnf or suchen" >&2; exit 1 ;;
esac
case $nnet_feats in
  mfcc|fbank) ;;
  *) echo "$0: --nnet-feats $nnet_feats: choose mfcc or fbank" >&2; exit 1 ;;
esac
case $gmm in
  mono) gmms=mono ;;
  tri1) gmms="mono tri1" ;;
  *) echo "$0: --gmm $gmm: choose mono or tri1" >&2; exit 1 ;;
esac
case $augment in
  true) train=train_aug; ali=$exp/${gmm}_ali_aug ;;  # the GMM trains on the clean train set
  false) train=train; ali=$exp/$gmm ;;
esac
graph_of() {  # the networks and --gmm decode with exp/graph, the other GMMs with their own
  if [ "$1" = $gmm ]; then echo $exp/graph; else echo $exp/graph_$1; fi
}

if [ $stage -le 0 ] && [ $stop_stage -ge 0 ]; then
  run_stage 0 corpus asrdist-prepare-mini --out $data --hours $hours \
    ${test_hours:+--test-hours $test_hours} --seed $seed
  if $augment; then
    run_stage 0 augment asrdist-augment --seed $seed $aug_opts $data/train $data/train_aug
  fi
fi

if [ $stage -le 1 ] && [ $stop_stage -ge 1 ]; then
  # MFCC of every part (the GMM trains on train's, aligns train_aug's, decodes test's); fbank
  # of the networks' train and test sets when --nnet-feats fbank
  for part in $(echo train $train test | tr ' ' '\n' | uniq); do
    run_stage 1 "mfcc $part" asrdist-features --kind mfcc --nj $nj --cmd "$train_cmd" \
      $data/$part $data/${part}_mfcc
    if [ $nnet_feats = fbank ] && { [ $part != train ] || ! $augment; }; then
      run_stage 1 "fbank $part" asrdist-features --kind fbank --nj $nj \
        --cmd "$train_cmd" $data/$part $data/${part}_fbank
    fi
  done
fi

if [ $stage -le 2 ] && [ $stop_stage -ge 2 ]; then
  run_stage 2 "monophone GMM" asrdist-align-gmm --nj $nj $data/train_mfcc $data/lang $exp/mono
  if [ $gmm = tri1 ]; then  # tied triphones from the monophones' alignments (train_deltas.sh)
    run_stage 2 "triphone GMM" asrdist-train-deltas --nj $nj $tri_opts $data/train_mfcc \
      $data/lang $exp/mono $exp/tri1
  fi
  if $augment; then  # sp copies realigned with the clean model, rvb/noise copies copied
    run_stage 2 "align augmented" asrdist-align-aug --nj $nj $data/${train}_mfcc $data/lang \
      $exp/$gmm $ali
  fi
fi

if [ $stage -le 3 ] && [ $stop_stage -ge 3 ]; then
  run_stage 3 ingestion asrdist-ingest-ali $ali $data/${train}_$nnet_feats/feats.scp $exp/${gmm}_pdf
fi

if [ $stage -le 4 ] && [ $stop_stage -ge 4 ] && [ $setup != suchen ]; then
  for a in $algos; do
    run_stage 4 "train $setup $a x$learners" "$repo_root/local/launch_train.sh" \
      --learners $learners -- --config conf/train_$setup.yaml --data $data/${train}_$nnet_feats \
      --targets $exp/${gmm}_pdf --out $exp/${setup}_$a --algo $a --resume $train_opts
  done
fi

if [ $stage -le 4 ] && [ $stop_stage -ge 4 ] && [ $setup = suchen ]; then
  # RBM pretraining (the learners average their RBMs too), then the sigmoid DNN it initialises,
  # trained with NG-SGD and model averaging every --avg-frames frames (conf/train_dnn_suchen.yaml)
  run_stage 4 "pretrain rbm x$learners" "$repo_root/local/launch_train.sh" --learners $learners \
    --command asrdist-pretrain-rbm -- --data $data/${train}_$nnet_feats --targets $exp/${gmm}_pdf \
    --out $exp/dbn --splice 5 --hidden-layers 4 --hidden-units 512 $pretrain_opts
  run_stage 4 "train ma x$learners" "$repo_root/local/launch_train.sh" --learners $learners -- \
    --config conf/train_dnn_suchen.yaml --data $data/${train}_$nnet_feats --targets $exp/${gmm}_pdf \
    --out $exp/dnn_suchen_ma --init-dbn $exp/dbn/dbn.pt --resume $train_opts
fi

if [ $stage -le 4 ] && [ $stop_stage -ge 4 ]; then
  run_stage 4 plot asrdist-plot $(for r in $runs; do echo $exp/$r; done) -o $exp/curves.png
fi

if [ $stage -le 5 ] && [ $stop_stage -ge 5 ]; then
  for g in $gmms; do
    run_stage 5 "graph $g" asrdist-mkgraph --lang $data/lang --model $exp/$g/final.mdl \
      --text $data/train/text --order 3 --out $(graph_of $g)
  done
fi

if [ $stage -le 6 ] && [ $stop_stage -ge 6 ]; then
  # one lattice search per utterance; the sweep (s5c's LMWT 5..17 x WIP 0.0 0.5 1.0) is read
  # off the lattices
  for g in $gmms; do
    run_stage 6 "decode $g" asrdist-decode --graph $(graph_of $g) --nj $nj --cmd "$decode_cmd" \
      $decode_opts --gmm $exp/$g/final.mdl --data $data/test_mfcc --out $exp/$g/decode_test
  done
  for r in $runs; do
    run_stage 6 "decode $r" asrdist-decode --graph $exp/graph --nj $nj --cmd "$decode_cmd" \
      $decode_opts --model $exp/$r/final.pt --data $data/test_$nnet_feats --out $exp/$r/decode_test
  done
fi

if [ $stage -le 7 ] && [ $stop_stage -ge 7 ]; then
  rm -f $exp/results.md $exp/results.json  # the report lists the systems scored by this run
  subsets=spk,$data/test/utt2synth  # WER per test voice and per synthesizer
  for g in $gmms; do
    run_stage 7 "score $g" asrdist-score text --subsets-by $subsets --report $exp/results.md \
      --name $g $data/test/text $exp/$g/decode_test
  done
  for r in $runs; do
    run_stage 7 "score $r" asrdist-score text --subsets-by $subsets --report $exp/results.md \
      --name "$r x$learners" $data/test/text $exp/$r/decode_test
  done
  cat $exp/results.md
fi

if [ $stage -le 8 ] && [ $stop_stage -ge 8 ] && [ -n "$seq_objectives" ] && [ $setup != suchen ]; then
  # sequence training (Kaldi's make_denlats.sh, then train_discriminative.sh): each CE network's
  # lattices of its own training data over a graph with a weak LM (exp/graph_den), then a few
  # epochs of each objective from it, whole utterances per step, the numerator the alignments
  # the CE targets came from
  silence=$(cat $data/lang/phones/silence.csl)
  run_stage 8 "denominator graph" asrdist-mkgraph --lang $data/lang --model $exp/$gmm/final.mdl \
    --text $data/train/text --order $den_lm_order --out $exp/graph_den
  for a in $algos; do
    r=${setup}_$a
    run_stage 8 "denlats $r" asrdist-decode --graph $exp/graph_den --nj $nj --cmd "$decode_cmd" \
      $denlats_opts --lmwt "" --model $exp/$r/final.pt --data $data/${train}_$nnet_feats \
      --out $exp/${r}_denlats
    for o in $seq_objectives; do
      run_stage 8 "train $r $o x$learners" "$repo_root/local/launch_train.sh" \
        --learners $learners -- --config conf/train_$setup.yaml --data $data/${train}_$nnet_feats \
        --targets $exp/${gmm}_pdf --out $exp/${r}_$o --algo $a --resume $train_opts \
        --objective $o --init-model $exp/$r/final.pt --denlats $exp/${r}_denlats \
        --alignments $ali $([ $o = mmi ] || echo --silence-phones $silence) --feature-masks 0 \
        --time-masks 0 --warmup-epochs 0 $seq_opts
      run_stage 8 "decode ${r}_$o" asrdist-decode --graph $exp/graph --nj $nj \
        --cmd "$decode_cmd" $decode_opts --model $exp/${r}_$o/final.pt --data $data/test_$nnet_feats \
        --out $exp/${r}_$o/decode_test
      run_stage 8 "score ${r}_$o" asrdist-score text --subsets-by spk,$data/test/utt2synth \
        --report $exp/results.md --name "${r}_$o x$learners" $data/test/text $exp/${r}_$o/decode_test
    done
  done
  cat $exp/results.md
fi
