#!/usr/bin/env bash
# Switchboard-1 (~300 h): a BLSTM hybrid trained with any distributed strategy on the
# alignments of the user's Kaldi system, decoded with its graph, scored on eval2000 as
# Kaldi's local/score_sclite.sh does. See README.md. With your s5c system's data dirs (route 1):
#   ./run.sh --train-data ~/kaldi/egs/swbd/s5c/data/train_nodup --test-data \
#       ~/kaldi/egs/swbd/s5c/data/eval2000 --ali-dir ~/kaldi/egs/swbd/s5c/exp/tri4_ali_nodup \
#       --graph-dir ~/kaldi/egs/swbd/s5c/exp/tri4/graph_sw1_tg --algo adpsgd-random --learners 8
# or from the LDC releases alone (route 2: data dirs as s5c's scripts make them):
#   ./run.sh --swbd-audio /LDC/LDC97S62 --ms98 /LDC/swb_ms98_transcriptions \
#       --eval2000-audio /LDC/LDC2002S09 --eval2000-ref /LDC/LDC2002T43 \
#       --ali-dir ~/kaldi/egs/swbd/s5c/exp/tri4_ali_nodup \
#       --graph-dir ~/kaldi/egs/swbd/s5c/exp/tri4/graph_sw1_tg --algo adpsgd-random --learners 8
# The stages (--stage N --stop-stage M runs N..M):
#   0 data       route 1 (--train-data, --test-data): your Kaldi data dirs, as they are;
#                route 2: asrdist-prepare-swbd: LDC releases -> data/{train,train_dev,
#                train_nodup,eval2000} as s5c makes them
#   1 features   40-dim log-mel fbank at 8 kHz, Kaldi framing (or your Kaldi feats as is);
#                with extra streams (fMLLR, i-vectors), fbank + deltas with them joined per frame
#   2 targets    asrdist-ingest-ali: the Kaldi alignment dir -> pdf-id targets
#   3 train      asrdist-train (any --algo) under srun / mpiexec / torchrun
#   4 decode     network once over eval2000 (scores kept), then the LM-weight x WIP sweep;
#                with --rescore-lm, the lattices rescored with a 4-gram (lmrescore_const_arpa.sh)
#   5 score      s5c's score_sclite.sh: recording-relative CTM, filter, acronyms mapped back
#                with its dict's acronyms.map, hubscr semantics; exp/RESULTS: a line per run dir
set -euo pipefail
cd "$(dirname "$0")"
. ./path.sh
. ./cmd.sh
. "$repo_root/local/swbd/defaults.sh"
help_message="Usage: $0 --train-data DIR --test-data DIR --ali-dir DIR --graph-dir DIR [options]
   or: $0 --swbd-audio DIR --ms98 DIR --eval2000-audio DIR --eval2000-ref DIR
       --ali-dir DIR --graph-dir DIR [options]
(options: $repo_root/local/swbd/defaults.sh)"
. "$repo_root/local/parse_options.sh"
. "$repo_root/local/swbd/check_paths.sh"
. "$repo_root/local/swbd/dirs.sh"
. "$repo_root/local/swbd/rescore.sh"
. "$repo_root/local/log.sh"
check_swbd_paths

# scoring maps acronyms back as s5c's score_sclite.sh does, with the map of the dict the graph
# was made from: your system's (beside --test-data) on route 1, stage 0's on route 2
if [ -z "$acronyms" ] && [ -n "$test_data" ]; then
  acronyms=$(dirname "$test_data")/local/dict_nosp/acronyms.map
  [ -f "$acronyms" ] || _path_error --acronyms "" "required with --test-data when \
$acronyms does not exist: give your s5c system's data/local/dict_nosp/acronyms.map"
fi
[ -z "$acronyms" ] || [ -f "$acronyms" ] || _path_error --acronyms "$acronyms" "no such file"
prepare_opts=()
add_convention_opts  # --sp-prefix, --allow-partial, --extend-eval2000
train_set=train_nodup${speed_perturb:+_sp}
swbd_dirs  # train_src, train_dir, train_input, targets, run, decode (and the test set's)
rescore_dirs  # with --rescore-lm: rescore_old_lang, rescore_name, decode_rescored
fbank_opts="--kind fbank --num-mel-bins 40 --sample-rate 8000"

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
    --data $test_input --nj $nj --cmd "$decode_cmd" --out $run/loglikes_eval2000
  run_stage 4 "decode sweep" asrdist-decode --graph $graph_dir --trans-mdl $ali_dir/final.mdl \
    --loglikes $run/loglikes_eval2000/loglikes.scp --data $test_input --nj $nj \
    --cmd "$decode_cmd" --lmwt "$lmwts" --wip "$wips" --out $decode
  if [ -n "$rescore_lm" ]; then  # steps/lmrescore_const_arpa.sh: tg scores out, 4-gram in
    run_stage 4 "rescore $rescore_name" asrdist-lmrescore --cmd "$decode_cmd" \
      --trans-mdl $ali_dir/final.mdl --lmwt "$lmwts" --wip "$wips" $rescore_old_lang \
      $rescore_lm $test_input $decode $decode_rescored
  fi
fi

if [ $stage -le 5 ] && [ $stop_stage -ge 5 ]; then
  run_stage 5 score asrdist-score hubscr --recipe s5c \
    --acronyms "${acronyms:-$data/local/dict_nosp/acronyms.map}" --stm $test_src/stm \
    --glm $test_src/glm --data $test_src $decode | tee $decode/scoring.txt
  update_results $exp $run $decode/scoring.txt
  if [ -n "$rescore_lm" ]; then  # the fg rows beside the tg ones: <run>_<rescore_name>
    run_stage 5 "score $rescore_name" asrdist-score hubscr --recipe s5c \
      --acronyms "${acronyms:-$data/local/dict_nosp/acronyms.map}" --stm $test_src/stm \
      --glm $test_src/glm --data $test_src $decode_rescored \
      | tee $decode_rescored/scoring.txt
    update_results $exp ${run}_$rescore_name $decode_rescored/scoring.txt
  fi
fi
