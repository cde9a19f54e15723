# Shell functions shared by the run.sh of recipes/swbd300 and recipes/swbd2000, sourced after
# the options (local/swbd/defaults.sh) are parsed; the stages' bodies are in
# local/swbd/stages.sh, each run.sh's stage blocks call them.

# swbd_dirs: the dirs the stages read and write, from the options and $train_set (route 2's
# training set). Sets train_src and test_src (the Kaldi data dirs: route 1's as given, route 2's
# made by stage 0; route 1 takes train_set from --train-data), train_dir and test_dir (their
# features), train_input and test_input (the network's input: the features, or them joined with
# --extra-feats), targets, run (exp/blstm_<algo>_n<learners>[_<affix>]: one dir per strategy
# and learner count) and decode.
swbd_dirs() {
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
  run=$exp/blstm_${algo}_n${learners}${affix:+_$affix}
  decode=$run/decode_eval2000_$(basename "$graph_dir")
}

# add_convention_opts: appends to the array prepare_opts the asrdist-prepare-swbd flags of
# --sp-prefix, --allow-partial and --extend-eval2000 (none where an option is left empty: the
# recipe's Kaldi conventions).
add_convention_opts() {
  case "$sp_prefix" in true) prepare_opts+=(--always-include-prefix) ;;
    false) prepare_opts+=(--no-always-include-prefix) ;; esac
  case "$allow_partial" in true) prepare_opts+=(--allow-partial) ;; esac
  case "$extend_eval2000" in true) prepare_opts+=(--extend-eval2000) ;;
    false) prepare_opts+=(--no-extend-eval2000) ;; esac
}

# update_results EXP RUN_DIR SCORING: EXP/RESULTS holds one line per run dir, the best line of
# SCORING (stage 5's output) prefixed by RUN_DIR's name; RUN_DIR's earlier line is replaced,
# the other runs' kept. Prints EXP/RESULTS.
update_results() {
  local results=$1/RESULTS name
  name=$(basename "$2")
  { if [ -f $results ]; then grep -v "^$name " $results || true; fi
    grep '^best: ' $3 | sed "s|^best: |$name |"; } > $1/.RESULTS.tmp
  mv $1/.RESULTS.tmp $results
  cat $results
}
