# Shared logging for recipes: log MESSAGE prints a time-stamped line to stderr;
# run_stage N NAME CMD... runs one stage and prints its wall time.
log() { echo "$(date '+%F %T') $*" >&2; }
run_stage() {
  local n=$1 name=$2; shift 2
  local t0=$SECONDS
  log "stage $n ($name): start"
  "$@"
  log "stage $n ($name): done in $((SECONDS - t0)) s"
}
