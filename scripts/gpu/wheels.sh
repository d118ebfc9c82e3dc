#!/usr/bin/env bash
# Wheels of what the lent GPU machines' image lacks for the GPU suite (it has torch, lightning,
# torchmetrics, tokenizers, tensorboard, pandas, pyarrow; no network there): python-dotenv (the CLI reads .env), Hydra and its
# OmegaConf/ANTLR, `datasets` with its dill/multiprocess, ruptures (the heads' change points), and pytest-xdist (pyproject's addopts name
# --dist, which pytest refuses without it). Run here, where pip reaches PyPI;
# carry .whl/ (git-ignored) with the call, then on the GPU machine, from the repo root:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && \
#     PYTHONPATH=/tmp/site:. python3 scripts/gpu/suite.py --newsgroups-path .gpu_data/20newsgroups
#     --pretrained .gpu_data/all-MiniLM-L6-v2
# (.gpu_data/: a copy of ../shared/data/20newsgroups and of ../shared/models/all-MiniLM-L6-v2, also
# git-ignored and carried. The model's weights travel in float16, 45 MB: the float32 file alone is 87
# MiB, over the 64 MiB a call carries; training upcasts them to float32 when it loads them, so the
# fine-tune starts from the checkpoint rounded to fp16, a relative change of at most 2^-11.)
set -euo pipefail
cd "$(dirname "$0")/../.."  # the repo root (this script is scripts/gpu/wheels.sh)
mkdir -p .whl .gpu_data "$(dirname "$(git rev-parse --git-path info/exclude)")"
exclude=$(git rev-parse --git-path info/exclude)
grep -qxF '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >> "$exclude"
grep -qxF '/.gpu_data/' "$exclude" 2>/dev/null || echo '/.gpu_data/' >> "$exclude"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
  hydra-core==1.3.8 omegaconf==2.3.1 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 \
  python-dotenv==1.2.4 pytest-xdist==3.8.0 execnet==2.1.2 \
  ruptures==1.1.10  # xdist: pyproject's addopts name --dist; ruptures: the timeline's change points (text-formation)
python3 -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3   # a source release only: pure Python
# 20 Newsgroups as zstd Parquet (a format data.path reads; the same rows, 10 MB against the .jsonl.gz files'
# 13.6: with the fp16 model, the wheels and the tracked tree, the gzip copy put a call over its 64 MiB)
src=../shared/data/20newsgroups dst=.gpu_data/20newsgroups
if [ -f "$src/train.jsonl.gz" ]; then
  mkdir -p "$dst"
  python3 - "$src" "$dst" <<'EOF2'
import gzip, json, sys
import pyarrow as pa
import pyarrow.parquet as pq
for split in ("train", "test"):
    rows = [json.loads(line) for line in gzip.open(f"{sys.argv[1]}/{split}.jsonl.gz", "rt", encoding="utf-8")]
    table = pa.table({k: [r[k] for r in rows] for k in rows[0]})
    pq.write_table(table, f"{sys.argv[2]}/{split}.parquet", compression="zstd", compression_level=19)
EOF2
else
  echo "no $src here: the 20NG parts need a copy"
fi
src=../shared/models/all-MiniLM-L6-v2 dst=.gpu_data/all-MiniLM-L6-v2
if [ -f "$src/model.safetensors" ]; then
  mkdir -p "$dst"
  cp "$src"/{config.json,tokenizer.json,tokenizer_config.json,special_tokens_map.json,vocab.txt} "$dst"/
  python3 - "$src/model.safetensors" "$dst/model.safetensors" <<'EOF'
import sys
from safetensors.torch import load_file, save_file
save_file({k: v.half() if v.is_floating_point() else v for k, v in load_file(sys.argv[1]).items()}, sys.argv[2],
          metadata={"format": "pt"})
EOF
else
  echo "no $src here: the finetune part needs a BERT-family folder (--pretrained)"
fi
du -sh .whl .gpu_data
ls -la .whl .gpu_data
