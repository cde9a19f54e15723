# Path checks for recipes/swbd300 and swbd2000, sourced after option parsing: a missing or
# wrong path stops the recipe at once, naming the option and what it should hold.
_path_error() { echo "$0: $1 '$2': $3" >&2; exit 1; }

# need_dir OPTION VALUE WHAT: VALUE is given and is a directory
need_dir() {
  [ -n "$2" ] || _path_error "$1" "" "required: give $3"
  [ -d "$2" ] || _path_error "$1" "$2" "no such directory (expected $3)"
}

# need_files OPTION VALUE WHAT GLOB...: every GLOB matches directly under VALUE
need_files() {
  local opt=$1 value=$2 what=$3 glob; shift 3
  need_dir "$opt" "$value" "$what"
  for glob in "$@"; do
    compgen -G "$value/$glob" >/dev/null || _path_error "$opt" "$value" "has no $glob (expected $what)"
  done
}

# need_found OPTION VALUE WHAT NAME: a file NAME (a find -iname pattern) is somewhere under VALUE
need_found() {
  need_dir "$1" "$2" "$3"
  [ -n "$(find -L "$2" -iname "$4" -print -quit)" ] || _path_error "$1" "$2" "no $4 under it (expected $3)"
}

# The options both recipes share: route 1 (--train-data, --test-data: your Kaldi data dirs)
# or route 2 (the LDC releases).
check_swbd_paths() {
  if [ -n "$train_data$test_data" ]; then
    local audio=wav.scp test_audio=wav.scp  # not needed where --*-feats gives the features
    [ -z "$train_feats" ] || audio=utt2spk
    [ -z "$test_feats" ] || test_audio=utt2spk
    need_files --train-data "$train_data" "your Kaldi data dir of the training set, e.g. \
data/train_nodup_sp" utt2spk "$audio"
    need_files --test-data "$test_data" "your Kaldi data/eval2000" utt2spk stm glm "$test_audio"
  else
    check_ldc_paths
  fi
  need_files --ali-dir "$ali_dir" "a Kaldi alignment dir (steps/align_fmllr.sh)" \
    final.mdl num_jobs "ali.*.gz"
  need_files --graph-dir "$graph_dir" "a Kaldi graph dir (utils/mkgraph.sh)" HCLG.fst words.txt
  [ -z "$train_feats" ] || need_files --train-feats "$train_feats" "a Kaldi data dir with features" feats.scp
  [ -z "$test_feats" ] || need_files --test-feats "$test_feats" "a Kaldi data dir with features" feats.scp
  return 0
}

# Route 2: the LDC releases.
check_ldc_paths() {
  need_found --swbd-audio "$swbd_audio" "LDC97S62 with sw0NNNN.sph files" "sw0*.sph"
  need_found --ms98 "$ms98" "swb_ms98_transcriptions with sw*-ms98-a-trans.text files" \
    "sw*-ms98-a-trans.text"
  need_found --ms98 "$ms98" "swb_ms98_transcriptions with its lexicon sw-ms98-dict.text" \
    sw-ms98-dict.text
  need_found --eval2000-audio "$eval2000_audio" "LDC2002S09 with hub5e_00/english/*.sph" "*.sph"
  need_found --eval2000-audio "$eval2000_audio" "LDC2002S09 with hub5e_00/english/hub5e_00.pem" \
    hub5e_00.pem
  need_found --eval2000-ref "$eval2000_ref" "LDC2002T43 with reference/hub5e00.english.000405.stm" \
    hub5e00.english.000405.stm
}
