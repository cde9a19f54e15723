# Options shared by recipes/swbd300 and recipes/swbd2000 (sourced before parse_options.sh:
# each is also a flag, e.g. --ali-dir DIR).
stage=0
stop_stage=100
train_data=""       # route 1: your Kaldi data dir of the training set as it is, e.g. s5c's
                    # data/train_nodup_sp (wav.scp in any of Kaldi's forms, segments, text,
                    # utt2spk); with --test-data, the LDC options below are not used
test_data=""        # route 1: your Kaldi data/eval2000 (wav.scp, segments, stm, glm, ...)
swbd_audio=""       # route 2 (from the LDC releases): LDC97S62 (sw0NNNN.sph)
ms98=""             # swb_ms98_transcriptions (ISIP MS98 word transcripts)
eval2000_audio=""   # LDC2002S09 (hub5e_00/english/*.sph)
eval2000_ref=""     # LDC2002T43 (reference/hub5e00.english.000405.stm, en20000405_hub5.glm)
ali_dir=""          # the user's Kaldi alignment dir of the training set, e.g. exp/tri4_ali_nodup
graph_dir=""        # the user's Kaldi graph dir, e.g. exp/tri4/graph_sw1_tg
speed_perturb=""    # e.g. "0.9 1.0 1.1" when ali_dir holds speed-perturbed (sp0.9-...) alignments
sp_prefix=""        # true|false: ids of the speed-1.0 copy prefixed sp1.0- (default: as the
                    # recipe's Kaldi recipe: true for swbd300 (s5c), false for swbd2000)
extend_eval2000=""  # true|false: eval2000 segments extended by 0.1 s (default: true for
                    # swbd300 (s5c's eval2000_data_prep.sh), false for swbd2000 (fisher_swbd's))
allow_partial=false # true: go on when a release is not the size Kaldi's scripts check (2435/2438
                    # Switchboard sph, 11699 Fisher, 80 eval2000 sides); else stage 0 stops
dev_utts=4000       # train_dev: the first N utterances of Switchboard (s5c; swbd2000 has none)
max_dup=300         # train_nodup: about N per transcript (remove_dup_utts.sh)
train_feats=""      # the user's own Kaldi data dir of the training set (feats.scp...), taken as is
test_feats=""       # the same for eval2000
extra_feats=""      # extra per-frame streams, e.g. "fmllr/feats.scp ivectors/ivector_online.scp:10"
extra_test_feats="" # the same streams for eval2000
ingest_opts=""      # extra asrdist-ingest-ali flags, e.g. "--max-missing 0.01" (failed alignments)
train_config=conf/train_blstm.yaml
train_opts=""       # extra asrdist-train flags, e.g. "--epochs 8"
algo=adpsgd-random  # any asrdist-train --algo
learners=1          # learner processes (one per GPU); the run dir is
                    # exp/blstm_<algo>_n<learners>[_<affix>], so runs never share one
affix=""            # tells apart runs of one strategy and learner count (Kaldi's --affix)
launcher=auto       # auto (srun in a Slurm job, else mpiexec, else torchrun), srun, mpiexec, none
device=auto         # cuda, cpu or auto
lmwts="5 6 7 8 9 10 11 12 13 14 15 16 17"  # LM weights of the sweep, each read off the
                    # lattices: s5c's and fisher_swbd's local/score_sclite.sh's min_lmwt..max_lmwt
                    # (5..20 before Kaldi's 2016 change)
wips="0.0 0.5 1.0"  # word insertion penalties of the sweep: score_sclite.sh's word_ins_penalty
acronyms=""         # swbd300: the s5c dict's acronyms.map for scoring (default: your system's
                    # data/local/dict_nosp/acronyms.map beside --test-data, else stage 0's);
                    # swbd2000 (fisher_swbd) uses none
rescore_lm=""       # a 4-gram to rescore the tg lattices with, as s5c's
                    # steps/lmrescore_const_arpa.sh: an ARPA file (.gz or not), e.g. s5c's
                    # data/local/lm/sw1_fsh.o4g.kn.gz, or a lang dir with G.carpa, e.g. its
                    # data/lang_sw1_fsh_fg; the fg decode dir goes beside the tg one and
                    # exp/RESULTS gets its rows too
rescore_old_lang="" # the lang dir with the tg G.fst (default: --graph-dir when it has G.fst,
                    # else <s5c>/data/lang_<lm> for <s5c>/exp/<model>/graph_<lm>)
rescore_name=""     # the fg dir's and rows' name (default: the lang dir's name less lang_,
                    # or the ARPA file's name up to its first dot + _fg: sw1_fsh_fg)
nj=4                # parallel jobs for features and decoding (where: cmd.sh's train_cmd and
                    # decode_cmd, or --train-cmd and --decode-cmd)
data=data
exp=exp
