# Where the --nj jobs of features and decoding run, said as a Kaldi recipe's cmd.sh says it
# (asrdist's --cmd): run.pl runs them on this machine. On a Slurm cluster, e.g.
#   export train_cmd="slurm.pl --mem 4G --time 4:00:00"
#   export decode_cmd="slurm.pl --mem 8G --time 4:00:00 --max-jobs-run 50"
# (--num-threads N, --gpu N, --partition P as well; a job's log: log/TASK.N.log in its output
# dir). run.sh takes --train-cmd and --decode-cmd too. queue.pl is not implemented.
export train_cmd="run.pl"   # features
export decode_cmd="run.pl"  # decoding
