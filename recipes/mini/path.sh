# Puts the project's virtualenv and shared helpers first on PATH.
recipe_root=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$recipe_root/../.." && pwd)
[ -d "$repo_root/.venv/bin" ] && export PATH="$repo_root/.venv/bin:$PATH"
export PATH="$repo_root/local:$PATH"
export LC_ALL=C
