# The 4-gram rescoring of recipes/swbd300 and swbd2000 (Kaldi's steps/lmrescore_const_arpa.sh
# after the tg decode), sourced after the options are parsed and swbd_dirs has run.

# rescore_dirs: with --rescore-lm (an ARPA file, e.g. s5c's data/local/lm/sw1_fsh.o4g.kn.gz, or
# a lang dir with G.carpa, e.g. s5c's data/lang_sw1_fsh_fg), sets rescore_name (--rescore-name,
# else the lang dir's name less lang_, or the ARPA file's name up to its first dot + _fg: both
# sw1_fsh_fg),
# decode_rescored (the fg decode dir beside the tg one: decode_eval2000_<rescore_name>) and
# rescore_old_lang (--rescore-old-lang, else the graph dir when it holds G.fst (asrdist-
# mkgraph's), else s5c's layout: <s5c>/exp/<model>/graph_<lm> was made from
# <s5c>/data/lang_<lm>), checking each.
rescore_dirs() {
  [ -n "$rescore_lm" ] || return 0
  if [ -d "$rescore_lm" ]; then
    need_files --rescore-lm "$rescore_lm" "a lang dir with G.carpa (s5c: data/lang_sw1_fsh_fg)" \
      G.carpa
  else
    [ -f "$rescore_lm" ] || _path_error --rescore-lm "$rescore_lm" "no such ARPA file or dir"
  fi
  if [ -z "$rescore_old_lang" ]; then
    if [ -f "$graph_dir/G.fst" ]; then
      rescore_old_lang=$graph_dir
    else
      local graph_name
      graph_name=$(basename "$graph_dir")
      rescore_old_lang=$(dirname "$(dirname "$(dirname "$graph_dir")")")/data/lang_${graph_name#graph_}
    fi
  fi
  need_files --rescore-old-lang "$rescore_old_lang" "the lang dir whose G.fst the graph was \
made from (s5c: data/lang_sw1_tg)" G.fst words.txt
  if [ -z "$rescore_name" ]; then
    rescore_name=$(basename "$rescore_lm")
    if [ -d "$rescore_lm" ]; then
      rescore_name=${rescore_name#lang_}
    else
      rescore_name=${rescore_name%%.*}_fg
    fi
  fi
  decode_rescored=$run/decode_eval2000_$rescore_name
}
