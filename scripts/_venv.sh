# Sourced by scripts/serve and scripts/test: make ./.venv (Python 3.11) and install the
# project into it when pyproject.toml changed since the last install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export TZ=UTC
extras="${1:-}"
pick_python() {
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)'; then
      echo "$candidate"; return 0
    fi
  done
  echo "understudy: Python 3.11 is required (python3.11 not found)" >&2
  return 1
}
if [ ! -x .venv/bin/python ]; then
  echo "understudy: creating .venv" >&2
  "$(pick_python)" -m venv .venv
fi
stamp=".venv/.installed${extras:+-$extras}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ clients/python/pyproject.toml -nt "$stamp" ]; then
  echo "understudy: installing${extras:+ with [$extras]}" >&2
  .venv/bin/python -m pip install --quiet --upgrade pip >/dev/null
  # The server depends on the eval client (clients/python), installed from the checkout.
  .venv/bin/python -m pip install --quiet -e ./clients/python -e ".${extras:+[$extras]}"
  touch "$stamp"
fi
