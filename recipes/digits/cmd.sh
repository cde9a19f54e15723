# Where the --nj jobs of features and decoding run, said as a Kaldi recipe's cmd.sh says it
# (asrdist's --cmd): run.pl runs them on this machine; on a Slurm cluster e.g.
#   export train_cmd="slurm.pl --mem 4G --time 1:00:00"
# run.sh takes --train-cmd and --decode-cmd too.
export train_cmd="run.pl"   # features
export decode_cmd="run.pl"  # decoding
