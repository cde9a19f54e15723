# The stages of recipes/swbd300 and recipes/swbd2000, one function each, sourced by both run.sh
# after the options are parsed and swbd_dirs and rescore_dirs have run (local/swbd/dirs.sh,
# rescore.sh). Each run.sh shows its stages as Kaldi's run.sh does (if [ $stage -le N ] ...
# then swbd_<stage>; fi) and these are their bodies, once for both recipes. They read the
# recipe's options (local/swbd/defaults.sh, cmd.sh) and dirs (swbd_dirs) as the stages did
# inline; what differs between the recipes comes in as arguments (the scoring's recipe).

# swbd_data: stage 0. Route 1 (--train-data, --test-data): the user's Kaldi data dirs, as they
# are. Route 2: asrdist-prepare-swbd makes $data/{train,...,eval2000} from the LDC releases
# as the recipe's Kaldi recipe makes them (its flags beyond the releases' in prepare_opts).
swbd_data() {
  if [ -n "$train_data" ]; then
    log "stage 0 (data): your Kaldi data dirs $train_data and $test_data, as they are"
    return 0
  fi
  run_stage 0 data asrdist-prepare-swbd "${prepare_opts[@]}" --swbd-audio $swbd_audio \
    --ms98 $ms98 --eval2000-audio $eval2000_audio --eval2000-ref $eval2000_ref \
    --dev-utts $dev_utts --max-dup $max_dup --speed-perturb "$speed_perturb" --out $data
}

# swbd_features: stage 1. 40-dim log-mel fbank at 8 kHz of $train_src and $test_src into
# $train_dir and $test_dir (not where --train-feats / --test-feats give the user's); with
# --extra-feats, fbank + deltas joined with the extra streams into $train_input, $test_input.
swbd_features() {
  local fbank_opts="--kind fbank --num-mel-bins 40 --sample-rate 8000"
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
}

# swbd_targets: stage 2. The Kaldi alignment dir $ali_dir -> pdf-id targets in $targets.
swbd_targets() {
  run_stage 2 targets asrdist-ingest-ali $ingest_opts $ali_dir $train_input/feats.scp $targets
}

# swbd_train: stage 3. asrdist-train --algo $algo on $learners learners (srun, mpiexec or
# torchrun: local/launch_train.sh) on $train_input and $targets into $run; resumed if stopped.
swbd_train() {
  run_stage 3 "train $algo x$learners" "$repo_root/local/launch_train.sh" --learners $learners \
    --launcher $launcher -- --config $train_config --data $train_input --targets $targets \
    --out $run --algo $algo --device $device --resume $train_opts
}

# swbd_decode: stage 4. The network once over eval2000 (its scores kept in
# $run/loglikes_eval2000), then the LM-weight x WIP sweep with the user's graph into $decode;
# with --rescore-lm, the lattices rescored with the 4-gram into $decode_rescored.
swbd_decode() {
  run_stage 4 "network on eval2000" asrdist-compute-loglikes --model $run/final.pt \
    --data $test_input --nj $nj --cmd "$decode_cmd" --out $run/loglikes_eval2000
  run_stage 4 "decode sweep" asrdist-decode --graph $graph_dir --trans-mdl $ali_dir/final.mdl \
    --loglikes $run/loglikes_eval2000/loglikes.scp --data $test_input --nj $nj \
    --cmd "$decode_cmd" --lmwt "$lmwts" --wip "$wips" --out $decode
  if [ -n "$rescore_lm" ]; then  # steps/lmrescore_const_arpa.sh: tg scores out, 4-gram in
    run_stage 4 "rescore $rescore_name" asrdist-lmrescore --cmd "$decode_cmd" \
      --trans-mdl $ali_dir/final.mdl --lmwt "$lmwts" --wip "$wips" $rescore_old_lang \
      $rescore_lm $test_input $decode $decode_rescored
  fi
}

# swbd_score HUBSCR_OPTS...: stage 5. asrdist-score hubscr of $decode against eval2000's stm
# and glm, with the recipe's scoring (HUBSCR_OPTS: --recipe s5c|fisher_swbd, its acronym map);
# $exp/RESULTS gets a line for $run (and one for the 4-gram's, <run>_<rescore_name>).
swbd_score() {
  run_stage 5 score asrdist-score hubscr "$@" --stm $test_src/stm --glm $test_src/glm \
    --data $test_src $decode | tee $decode/scoring.txt
  update_results $exp $run $decode/scoring.txt
  if [ -n "$rescore_lm" ]; then  # the fg rows beside the tg ones
    run_stage 5 "score $rescore_name" asrdist-score hubscr "$@" --stm $test_src/stm \
      --glm $test_src/glm --data $test_src $decode_rescored | tee $decode_rescored/scoring.txt
    update_results $exp ${run}_$rescore_name $decode_rescored/scoring.txt
  fi
}
