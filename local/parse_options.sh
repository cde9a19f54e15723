# Kaldi-style option parsing; source it after declaring defaults as shell variables.
#   --foo-bar VALUE sets foo_bar=VALUE; an undeclared option aborts with "invalid option";
#   a boolean default accepts only true/false; --help prints $help_message.
#   --config FILE: every config file is sourced before any flag is applied, wherever it stands
#   on the command line (as Kaldi does), so a flag always wins over a config file.
_po_prev=""
for _po_arg in "$@"; do
  if [ "$_po_prev" = --config ]; then
    [ -f "$_po_arg" ] || { echo "$0: config file '$_po_arg' not found" >&2; exit 1; }
    # shellcheck disable=SC1090
    . "$_po_arg"
  fi
  _po_prev=$_po_arg
done
[ "$_po_prev" = --config ] && { echo "$0: option --config needs a value" >&2; exit 1; }
unset _po_prev _po_arg
while true; do
  [ -z "${1:-}" ] && break
  case "$1" in
    --help|-h)
      echo "${help_message:-no help message}" >&2; exit 0 ;;
    --*=*)
      echo "$0: options take the form '--name value', not '$1'" >&2; exit 1 ;;
    --config)
      shift 2 ;;  # sourced above
    --*)
      name=$(echo "$1" | sed 's/^--//; s/-/_/g')
      eval '[ -z "${'"$name"'+x}" ]' && { echo "$0: invalid option $1" >&2; exit 1; }
      [ $# -ge 2 ] || { echo "$0: option $1 needs a value" >&2; exit 1; }
      old=$(eval echo "\$$name")
      if [ "$old" = true ] || [ "$old" = false ]; then
        case "$2" in true|false) ;; *) echo "$0: option $1 takes true or false, not '$2'" >&2; exit 1 ;; esac
      fi
      eval "$name=\"\$2\""
      shift 2 ;;
    *) break ;;
  esac
done
true
