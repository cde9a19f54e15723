# The stages shared by recipes/swbd300 and recipes/swbd2000, sourced by their run.sh after
# the options (local/swbd/defaults.sh) are parsed and the paths checked; the recipe sets
# train_set, prepare_opts (an array: its corpus options for asrdist-prepare-swbd) and
# score_opts (an array: how its Kaldi recipe's score_sclite.sh makes the ctm).
#
#   0 data       route 1 (--train-data, --test-data): the user's Kaldi data dirs, as they are;
#                route 2: asrdist-prepare-swbd: LDC releases -> data/{train,train_nodup,...} as
#                s5c (swbd300) or fisher_swbd (swbd2000) makes them
#   1 features   40-dim log-mel fbank at 8 kHz, Kaldi framing (or the user's Kaldi feats as is);
#                with extra streams (fMLLR, i-vectors), fbank + deltas with them joined per frame
#   2 targets    asrdist-ingest-ali: the Kaldi alignment dir -> pdf-id targets
#   3 train      asrdist-train (any --algo) under srun / mpiexec / torchrun
#   4 decode     network once over eval2000 (scores kept), then the LM-weight x WIP sweep
#   5 score      score_sclite.sh: recording-relative CTM, filter, acronyms (s5c: its dict's
#                acronyms.map; fisher_swbd: split), hubscr semantics; exp/RESULTS: a line per
#                run dir (exp/blstm_<algo>_n<learners>[_<affix>])
. "$repo_root/local/log.sh"

fbank_opts="--kind fbank --num-mel-bins 40 --sample-rate 8000"
if [ -n "$train_data" ]; then  # route 1: the user's Kaldi data dirs, as they are
  train_src=$train_data test_src=$test_data train_set=$(basename "$train_data")
else                           # route 2: stage 0 makes them from the LDC releases
  train_src=$data/$train_set test_src=$data/eval2000
fi
train_dir=$data/${train_set}_fbank
test_dir=$data/eval2000_fbank
[ -n "$train_feats" ] && train_dir=$train_feats
[ -n "$test_feats" ] && test_dir=$test_feats
if [ -n "$extra_feats" ]; then
  train_input=$data/${train_set}_input test_input=$data/eval2000_input
else
  train_input=$train_dir test_input=$test_dir
fi
targets=$exp/$(basename "$ali_dir")_pdf
run=$exp/blstm_${algo}_n${learners}${affix:+_$affix}  # one dir per strategy and learner count
graph_name=$(basename "$graph_dir")
decode=$run/decode_eval2000_$graph_name

case "$sp_prefix" in true) prepare_opts+=(--always-include-prefix) ;;
  false) prepare_opts+=(--no-always-include-prefix) ;; esac
case "$allow_partial" in true) prepare_opts+=(--allow-partial) ;; esac
case "$extend_eval2000" in true) prepare_opts+=(--extend-eval2000) ;;
  false) prepare_opts+=(--no-extend-eval2000) ;; esac
if [ $stage -le 0 ] && [ $stop_stage -ge 0 ] && [ -n "$train_data" ]; then
  log "stage 0 (data): your Kaldi data dirs $train_data and $test_data, as they are"
elif [ $stage -le 0 ] && [ $stop_stage -ge 0 ]; then
  run_stage 0 data asrdist-prepare-swbd "${prepare_opts[@]}" --swbd-audio $swbd_audio \
    --ms98 $ms98 --eval2000-audio $eval2000_audio --eval2000-ref $eval2000_ref \
    --dev-utts $dev_utts --max-dup $max_dup --speed-perturb "$speed_perturb" --out $data
fi

if [ $stage -le 1 ] && [ $stop_stage -ge 1 ]; then
  if [ -z "$train_feats" ]; then
    run_stage 1 "fbank $train_set" asrdist-features $fbank_opts --nj $nj \
      --cmd "$train_cmd" $train_src $train_dir
  fi
  if [ -z "$test_feats" ]; then
    run_stage 1 "fbank eval2000" asrdist-features $fbank_opts --nj $nj \
      --cmd "$train_cmd" $test_src $test_dir
  fi
  if [ -n "$extra_feats" ]; then  # the papers' input: fbank + deltas (per-speaker CMVN), then
    # the streams unnormalised (fMLLR, i-vectors: as nnet3), as feats_layout records
    run_stage 1 "join $train_set" asrdist-join-feats --delta-order 2 $train_dir $train_input \
      $extra_feats
    run_stage 1 "join eval2000" asrdist-join-feats --delta-order 2 $test_dir $test_input \
      $extra_test_feats
  fi
fi

if [ $stage -le 2 ] && [ $stop_stage -ge 2 ]; then
  run_stage 2 targets asrdist-ingest-ali $ingest_opts $ali_dir $train_input/feats.scp $targets
fi

if [ $stage -le 3 ] && [ $stop_stage -ge 3 ]; then
  run_stage 3 "train $algo x$learners" "$repo_root/local/launch_train.sh" --learners $learners \
    --launcher $launcher -- --config $train_config --data $train_input --targets $targets \
    --out $run --algo $algo --device $device --resume $train_opts
fi

if [ $stage -le 4 ] && [ $stop_stage -ge 4 ]; then
  run_stage 4 "network on eval2000" asrdist-compute-loglikes --model $run/final.pt \
    --data $test_input --out $run/loglikes_eval2000
  run_stage 4 "decode sweep" asrdist-decode --graph $graph_dir --trans-mdl $ali_dir/final.mdl \
    --loglikes $run/loglikes_eval2000/loglikes.scp --data $test_input --nj $nj \
    --cmd "$decode_cmd" --lmwt "$lmwts" --wip "$wips" --out $decode
fi

if [ $stage -le 5 ] && [ $stop_stage -ge 5 ]; then
  run_stage 5 score asrdist-score hubscr "${score_opts[@]}" --stm $test_src/stm \
    --glm $test_src/glm --data $test_src $decode | tee $decode/scoring.txt
  # exp/RESULTS: one line per run dir (this run's replaced, the others' kept)
  name=$(basename $run)
  { if [ -f $exp/RESULTS ]; then grep -v "^$name " $exp/RESULTS || true; fi
    grep '^best: ' $decode/scoring.txt | sed "s|^best: |$name |"; } > $exp/.RESULTS.tmp
  mv $exp/.RESULTS.tmp $exp/RESULTS
  cat $exp/RESULTS
fi
