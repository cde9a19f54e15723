# Puts the project's virtualenv first on PATH; recipes call shared helpers by $repo_root/local.
recipe_root=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$recipe_root/../.." && pwd)
[ -d "$repo_root/.venv/bin" ] && export PATH="$repo_root/.venv/bin:$PATH"
export LC_ALL=C
