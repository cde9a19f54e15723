#!/usr/bin/env bash
# The digits recipe: the Free Spoken Digit Dataset (real recordings, 8 kHz), one digit per
# utterance, speaker-independent test. The whole Kaldi-style pipeline on a few minutes of audio.
#   ./run.sh                                   all stages, corpus ../../../shared/corpora/fsdd
#   ./run.sh --corpus DIR --test-corpus "DIR2 DIR3"   each DIRn/recordings/*.wav: a test set
#   ./run.sh --test-speakers lucas            hold out another speaker of the corpus
#   ./run.sh --test-speakers none --test-corpus "DIR ..."   train on all, test on DIRs only
# Every stage calls one asrdist CLI; a stage already done with the same options and inputs is
# skipped, one whose options or inputs changed is redone. RESULTS.md has the figures.
set -euo pipefail
cd "$(dirname "$0")"
. ./path.sh
. ./cmd.sh
. "$repo_root/local/log.sh"

stage=0
stop_stage=100
corpus=$repo_root/../shared/corpora/fsdd  # DIR/recordings/{digit}_{speaker}_{index}.wav
test_speakers=nicolas  # held out of training into data/test (comma-separated); none: all
                       # four train, and only the --test-corpus sets test
test_corpus=""     # further corpora in the same layout, space-separated: data/<basename> each
augment=true       # true: speed 0.9/1.1, reverberated and noisy copies for the network
aug_opts=""        # extra asrdist-augment flags, e.g. "--noise-fraction 1 --snr 0,15"
seed=0             # the augmentation's and the GMMs' draws (mixing up): another, another run
nj=2               # parallel jobs for features, alignment, decoding
mono_gauss=100     # Gaussians of the monophone GMM: 1000 (mini's) fit 3 speakers, not a 4th
gmm_opts=""        # extra asrdist-align-gmm flags, e.g. "--num-iters 40"
tri1_leaves=50     # tied states of the triphone GMM (tri1): the networks' pdfs; 0: no tri1
tri1_gauss=100    # its Gaussians in total (two a leaf: more fit the training speakers)
tri1_opts=""       # extra asrdist-train-deltas flags
sat_leaves=50      # the speaker-adapted GMM (tri3, fMLLR per speaker) from tri1; 0: no tri3
sat_gauss=100
sat_opts=""        # extra asrdist-train-sat flags
sat_first_pass=si  # the first pass giving the test speakers' first transforms: si (tri3's
                   # speaker-independent final.alimdl, decode_fmllr.sh's), mono or tri1
fmllr_passes=3     # fMLLR estimates per test speaker (decode_fmllr.sh makes 2)
mfcc_opts="--high-freq 0"  # mel bins up to the Nyquist frequency, as Kaldi's MFCC
algos="ssgd"       # distributed strategies trained in stage 4, one run dir each
learners=2         # learner processes per training run (mpiexec, torchrun or srun)
train_opts=""      # extra asrdist-train flags, e.g. "--epochs 2 --units 64"
decode_opts="--lmwt 10 --wip 0.0"  # one sweep point (acwt 0.1), not tuned on any test set
data=data          # where data dirs, features and lang go
exp=exp            # where models, decodes and results go
help_message="Usage: $0 [--stage N] [--stop-stage M] [--corpus DIR] [--test-speakers S1,S2]
       [--test-corpus \"DIR ...\"] [--augment true|false] [--aug-opts \"FLAGS\"] [--seed N] [--nj J]
       [--train-cmd CMD] [--decode-cmd CMD] [--mono-gauss N] [--gmm-opts \"FLAGS\"]
       [--tri1-leaves N] [--tri1-gauss N] [--tri1-opts \"FLAGS\"] [--sat-leaves N]
       [--sat-gauss N] [--sat-opts \"FLAGS\"] [--sat-first-pass si|mono|tri1] [--fmllr-passes N]
       [--mfcc-opts \"FLAGS\"]
       [--algos \"A B\"] [--learners N]
       [--train-opts \"FLAGS\"] [--decode-opts \"FLAGS\"] [--data DIR] [--exp DIR]"
. "$repo_root/local/parse_options.sh"

# The GMM systems, each decoded and scored (exp/<gmm>/final.mdl, a graph of its tree), and
# the one whose alignments the networks learn: the triphone system when there is one.
gmms="mono"
ali_gmm=mono
if [ "$tri1_leaves" -gt 0 ]; then gmms="mono tri1"; ali_gmm=tri1; fi
sat=false  # tri3: needs tri1's alignments
if [ "$tri1_leaves" -gt 0 ] && [ "$sat_leaves" -gt 0 ]; then gmms="$gmms tri3"; sat=true; fi
test_sets="test"
[ "$test_speakers" = none ] && test_sets=""
for d in $test_corpus; do test_sets="$test_sets $(basename "$d")"; done
case $augment in
  true) train=train_aug; ali=$exp/${ali_gmm}_ali_aug ;;  # the GMMs train on clean audio
  false) train=train; ali=$exp/$ali_gmm ;;
esac
runs=$(for a in $algos; do echo blstm_$a; done)
case $sat_first_pass in
  si|mono|tri1) ;;
  *) echo "$0: --sat-first-pass $sat_first_pass: choose si, mono or tri1" >&2; exit 1 ;;
esac

if [ $stage -le 0 ] && [ $stop_stage -ge 0 ]; then
  run_stage 0 corpus asrdist-prepare-digits --corpus "$corpus" --out $data \
    --test-speakers $test_speakers $(for d in $test_corpus; do echo --test-corpus "$d"; done)
  if $augment; then
    run_stage 0 augment asrdist-augment --seed $seed $aug_opts $data/train $data/train_aug
  fi
fi

if [ $stage -le 1 ] && [ $stop_stage -ge 1 ]; then
  # 8 kHz MFCC as Kaldi's telephone recipes make them (23 mel bins up to 4 kHz, 13 cepstra,
  # no energy), at the corpus's own rate: a file at another rate is refused, never resampled
  rate=$(cat $data/local/sample_rate)
  for part in $(echo train $train $test_sets | tr ' ' '\n' | uniq); do
    run_stage 1 "mfcc $part" asrdist-features --kind mfcc --sample-rate $rate $mfcc_opts --nj $nj \
      --cmd "$train_cmd" $data/$part $data/${part}_mfcc
  done
fi

if [ $stage -le 2 ] && [ $stop_stage -ge 2 ]; then
  run_stage 2 "monophone GMM" asrdist-align-gmm --nj $nj --seed $seed --total-gauss $mono_gauss \
    $gmm_opts $data/train_mfcc \
    $data/lang $exp/mono
fi

if [ $stage -le 2 ] && [ $stop_stage -ge 2 ] && [ "$tri1_leaves" -gt 0 ]; then
  # tri1 (train_deltas.sh): a small tree, ten words need few contexts
  run_stage 2 "triphone GMM" asrdist-train-deltas --nj $nj --seed $seed --num-leaves $tri1_leaves \
    --total-gauss $tri1_gauss $tri1_opts $data/train_mfcc $data/lang $exp/mono $exp/tri1
fi

if [ $stage -le 2 ] && [ $stop_stage -ge 2 ] && $sat; then
  # tri3 (train_sat.sh): tri1's tree size, each training speaker's features through its fMLLR
  run_stage 2 "speaker-adapted GMM" asrdist-train-sat --nj $nj --seed $seed --num-leaves $sat_leaves \
    --total-gauss $sat_gauss $sat_opts $data/train_mfcc $data/lang $exp/tri1 $exp/tri3
fi

if [ $stage -le 3 ] && [ $stop_stage -ge 3 ]; then
  if $augment; then  # sp copies realigned with the clean model, rvb/noise copies copied
    run_stage 3 "align augmented" asrdist-align-aug --nj $nj $data/${train}_mfcc $data/lang \
      $exp/$ali_gmm $ali
  fi
  run_stage 3 ingestion asrdist-ingest-ali $ali $data/${train}_mfcc/feats.scp \
    $exp/${ali_gmm}_pdf
fi

if [ $stage -le 4 ] && [ $stop_stage -ge 4 ]; then
  for a in $algos; do
    run_stage 4 "train $a x$learners" "$repo_root/local/launch_train.sh" --learners $learners -- \
      --config conf/train_blstm.yaml --data $data/${train}_mfcc --targets $exp/${ali_gmm}_pdf \
      --out $exp/blstm_$a --algo $a --resume $train_opts
  done
fi

if [ $stage -le 5 ] && [ $stop_stage -ge 5 ]; then
  # G: one digit per utterance, all ten equally likely (data/local/grammar.txt), no LM
  for g in $gmms; do
    run_stage 5 "graph $g" asrdist-mkgraph --lang $data/lang --model $exp/$g/final.mdl \
      --grammar $data/local/grammar.txt --out $exp/$g/graph
  done
fi

if [ $stage -le 6 ] && [ $stop_stage -ge 6 ]; then
  for t in $test_sets; do
    for g in $gmms; do
      fmllr=""
      if [ $g = tri3 ]; then  # decode_fmllr.sh: transforms from a first pass's best paths,
        # each further estimate on top of the last from tri3's own decode with it
        lat_mdl=$exp/$sat_first_pass/final.mdl; lats=$exp/$sat_first_pass/decode_$t; prev=""
        if [ $sat_first_pass = si ]; then
          lat_mdl=$exp/tri3/final.alimdl; lats=$exp/tri3/decode_$t.si
          run_stage 6 "decode tri3 $t si" asrdist-decode --graph $exp/tri3/graph --nj $nj \
            --cmd "$decode_cmd" $decode_opts --gmm $lat_mdl --data $data/${t}_mfcc --out $lats
        fi
        for k in $(seq 1 $fmllr_passes); do
          run_stage 6 "fMLLR $t pass $k" asrdist-est-fmllr --lattice-mdl $lat_mdl $prev \
            $decode_opts $data/lang $exp/tri3 $data/${t}_mfcc $lats $exp/tri3/trans_${t}_$k.ark
          fmllr="--fmllr $exp/tri3/trans_${t}_$k.ark"; prev="--previous $exp/tri3/trans_${t}_$k.ark"
          [ $k -eq $fmllr_passes ] && break
          lat_mdl=$exp/tri3/final.mdl; lats=$exp/tri3/decode_${t}_pass$k
          run_stage 6 "decode tri3 $t pass $k" asrdist-decode --graph $exp/tri3/graph --nj $nj \
            --cmd "$decode_cmd" $decode_opts --gmm $exp/tri3/final.mdl $fmllr \
            --data $data/${t}_mfcc --out $lats
        done
      fi
      run_stage 6 "decode $g $t" asrdist-decode --graph $exp/$g/graph --nj $nj \
        --cmd "$decode_cmd" $decode_opts --gmm $exp/$g/final.mdl $fmllr \
        --data $data/${t}_mfcc --out $exp/$g/decode_$t
    done
    for r in $runs; do
      run_stage 6 "decode $r $t" asrdist-decode --graph $exp/$ali_gmm/graph --nj $nj \
        --cmd "$decode_cmd" $decode_opts --model $exp/$r/final.pt --data $data/${t}_mfcc \
        --out $exp/$r/decode_$t
    done
  done
fi

if [ $stage -le 7 ] && [ $stop_stage -ge 7 ]; then
  rm -f $exp/results.md $exp/results.json $exp/RESULTS  # this run's systems only
  for t in $test_sets; do
    for s in $gmms $runs; do
      name="$s $t"
      case $s in blstm_*) name="$s x$learners $t" ;; esac
      run_stage 7 "score $name" asrdist-score text --subsets-by spk --report $exp/results.md \
        --name "$name" $data/$t/text $exp/$s/decode_$t
      echo "$name $(cat $exp/$s/decode_$t/best_wer)" >> $exp/RESULTS
    done
  done
  cat $exp/RESULTS
fi
