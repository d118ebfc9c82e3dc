#!/usr/bin/env bash
# One call on a lent GPU machine, as the 2026-11-28 window ran it: the carried wheels installed, then one
# scripts/gpu/suite.py process per group of parts, the groups side by side on the one GPU (the parts of a
# group in turn), each into its own folder; then one window summary (suite.py --merge) and everything
# in a single $OUT/window.tgz (a call brings back at most 8 files). Timing parts (kernels, model, overhead,
# nanogpt-loop) belong in a group of their own with nothing beside them.
#   bash scripts/gpu/call.sh finetune text-formation -- --finetune-minutes 0.9
#   bash scripts/gpu/call.sh nanogpt-loop
# Arguments after -- go to every suite process, after the carried data's --newsgroups-path and
# --pretrained; OUT is the folder that comes back (default: a temporary one, printed). LIMIT_S is the
# call's timeout_s: the groups are stopped 30 s before it (counted from this script's start), so that the parts that finished come back
# (the archive is written at the end: a call killed at its limit brought back nothing).
#   LIMIT_S=570 OUT=$OUT bash scripts/gpu/call.sh cuda-tests,nanogpt-loop
set -uo pipefail
py=${PYTHON:-python3}  # the machine's python3 holds torch
cd "$(dirname "$0")/../.."
groups=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do groups+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#groups[@]} -gt 0 ] || { echo "gpu/call.sh: name the part groups, e.g. finetune text-formation,cuda-tests" >&2; exit 2; }
if ls .whl/*.whl >/dev/null 2>&1 && ! $py -c "import hydra" 2>/dev/null; then  # what the machine lacks
  $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:.
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
OUT=${OUT:-$(mktemp -d)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT  # its part folders travel in the archive
data=()
[ -d .gpu_data/20newsgroups ] && data+=(--newsgroups-path .gpu_data/20newsgroups)
[ -f .gpu_data/all-MiniLM-L6-v2/config.json ] && data+=(--pretrained .gpu_data/all-MiniLM-L6-v2)
pids=() folders=()
for g in "${groups[@]}"; do
  f=$work/${g//,/+}
  mkdir -p "$f"
  folders+=("$f")
  limit=()
  [ -n "${LIMIT_S:-}" ] && limit=(timeout -k 10 $((LIMIT_S - 30 - SECONDS)))
  "${limit[@]}" $py scripts/gpu/suite.py --parts "$g" "${data[@]}" "$@" --out "$f" >"$f/stdout.log" 2>&1 &
  pids+=($!)
done
code=0
for p in "${pids[@]}"; do wait "$p" || code=1; done
$py scripts/gpu/suite.py --merge "${folders[@]}" --out "$work/window" >"$work/merge.log" 2>&1 || code=1
tar czf "$OUT/window.tgz" -C "$work" . && echo "gpu/call.sh: $OUT/window.tgz (part groups: ${groups[*]}; exit $code)"
cat "$work/window/suite.md" 2>/dev/null
exit $code
