#!/usr/bin/env bash
# Python tools the API contract tests use, in a virtualenv outside the clone (reused across clones,
# like the cargo target directory), pinned:
#   Schemathesis            the contract fuzzer run against /openapi.json
#   openapi-python-client   a client generated from the same document
#
#   hack/pytools.sh                 install (idempotent) and print the virtualenv's bin directory
#   hack/pytools.sh TOOL ARGS...    install, then run TOOL from the virtualenv
set -euo pipefail
schemathesis_version=4.32.5
client_version=0.29.1

venv=${ERU_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/eru/venv-st${schemathesis_version}-opc${client_version}}
stamp=$venv/.installed
if [ ! -f "$stamp" ]; then
  # A virtualenv is tied to its path, so it is built in place; the stamp is written last, and a
  # venv without it (an interrupted install) is rebuilt. flock keeps parallel callers apart.
  mkdir -p "$(dirname "$venv")"
  exec 9>"$venv.lock"
  flock 9
  if [ ! -f "$stamp" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
      "schemathesis==$schemathesis_version" "openapi-python-client==$client_version" >&2
    touch "$stamp"
  fi
  exec 9>&-
fi
if [ $# -eq 0 ]; then
  echo "$venv/bin"
else
  tool=$1
  shift
  exec "$venv/bin/$tool" "$@"
fi
