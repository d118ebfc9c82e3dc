#!/usr/bin/env bash
# One call of a GPU window, as scripts/gpu/window.json plans it: the plan checked (one line and nothing run
# where it does not fit), the carried wheels installed, then scripts/gpu/suite.py --call N: the call's parts
# in turn, each within its expected_s, each writing its result files as it goes, and $OUT/window.tgz packed
# again after every part (a call brings back at most 8 files: one archive). A call cut at its limit brings
# back the archive of the parts that finished and what the cut one had written.
#   LIMIT_S=570 OUT=$OUT bash scripts/gpu/call.sh 1          # the call's timeout_s: suite.py stops 20 s before it
#   bash scripts/gpu/call.sh 2 -- --smoke                    # on the CPU, tiny (suite.py --rehearse runs each call so)
# Arguments after -- go to suite.py after the carried data's --newsgroups-path and --pretrained; PLAN names
# another plan file; OUT is the folder that comes back (default: a temporary one, printed).
set -uo pipefail
py=${PYTHON:-python3}  # the machine's python3 holds torch
cd "$(dirname "$0")/../.."
call=${1:-}
[[ "$call" =~ ^[12]$ ]] || { echo "gpu/call.sh: name the plan's call, 1 or 2: bash scripts/gpu/call.sh 1 (scripts/gpu/window.json)" >&2; exit 2; }
shift
[ "${1:-}" = "--" ] && shift
plan=${PLAN:-scripts/gpu/window.json}
if ls .whl/*.whl >/dev/null 2>&1 && ! $py -c "import hydra" 2>/dev/null; then  # what the machine lacks
  $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:.
fi
$py scripts/gpu/suite.py --plan "$plan" --check-plan >/dev/null || exit 2  # its one line is on stderr
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
OUT=${OUT:-$(mktemp -d)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT  # its folder travels in the archive
data=()
[ -d .gpu_data/20newsgroups ] && data+=(--newsgroups-path .gpu_data/20newsgroups)
[ -f .gpu_data/all-MiniLM-L6-v2/config.json ] && data+=(--pretrained .gpu_data/all-MiniLM-L6-v2)
folder=$work/call$call
mkdir -p "$folder"
limit=()
[ -n "${LIMIT_S:-}" ] && limit=(timeout -k 10 $((LIMIT_S - 20 - SECONDS)))
"${limit[@]}" $py scripts/gpu/suite.py --plan "$plan" --call "$call" "${data[@]}" "$@" --out "$folder" \
  --archive "$OUT/window.tgz" >"$folder/call.log" 2>&1
code=$?
tar czf "$OUT/window.tgz.part" -C "$work" "call$call" && mv "$OUT/window.tgz.part" "$OUT/window.tgz" \
  && echo "gpu/call.sh: $OUT/window.tgz (call $call of $plan; exit $code)"
cat "$folder/suite.md" 2>/dev/null
exit $code
