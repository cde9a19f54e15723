# Where the --nj jobs of features and decoding run, said as a Kaldi recipe's cmd.sh says it
# (asrdist's --cmd): run.pl runs them on this machine. On a Slurm cluster, e.g.
#   export train_cmd="slurm.pl --mem 4G --time 1:00:00"
#   export decode_cmd="slurm.pl --mem 8G --time 1:00:00"
export train_cmd="run.pl"   # features
export decode_cmd="run.pl"  # decoding, rescoring
