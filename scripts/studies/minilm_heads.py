#!/usr/bin/env python
"""The real pretrained all-MiniLM-L6-v2 (../shared/models: 6 layers, 12 heads, d=384) through
attnexp's own maps: what its heads do on a few hundred 20 Newsgroups sentences, and the README's
pictures of it.

- heads: the first sentence of 8-40 words from each of the first N bydate test posts (headers,
  quotes and signatures left out), encoded one by one with the model's tokenizer (its own fixed
  padding off, as in attnexp), every head's pattern scores (attnexp.heads.roles, after Clark et al.
  2019: previous / next / self / [CLS] / [SEP] / punctuation / broad / local) averaged over every
  real query row of every sentence, and a role per head (the thresholds in roles.THRESHOLDS).
  Writes minilm_heads.{json,md} and images/minilm_roles.png.
- pictures: `attnexp maps hf=...` of a sentence pair (grid, viewer screenshot, bertviz's head
  view) and of a short 20 Newsgroups post (grid, the viewer's rollout view).

    python scripts/studies/minilm_heads.py                 # ~1 minute on 2 CPU cores
    python scripts/studies/minilm_heads.py --n 500 --parts heads
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "scripts" / "results"
IMAGES = RESULTS / "images"
SHARED = REPO.parent / "shared"
PAIR = ("The keys to the cabinet are on the table.", "Where are the keys?")
sys.path.insert(0, str(REPO / "scripts"))

from common import scratch, screenshot  # noqa: E402


def bodies(path: Path):
    """Each post's body: after the header block, without quoted lines, attributions or signatures."""
    with gzip.open(path, "rt") as f:
        for line in f:
            text = json.loads(line)["text"]
            body = text.split("\n\n", 1)[1] if "\n\n" in text else text
            body = body.split("\n-- \n", 1)[0]
            kept = [x for x in body.splitlines() if not re.match(r"\s*(>|\||In article|.*writes:|.*wrote:)", x)]
            yield " ".join(" ".join(kept).split())


def sentences(path: Path, n: int) -> list[str]:
    """The first well-formed sentence (8-40 words, mostly letters) of each post, until n."""
    out = []
    for body in bodies(path):
        for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", body):
            words = s.split()
            letters = sum(c.isalpha() for c in s) / max(len(s), 1)
            if 8 <= len(words) <= 40 and letters > 0.75 and s[-1] in ".!?" and "@" not in s:
                out.append(s)
                break
        if len(out) == n:
            break
    return out


def heads(model: Path, data: Path, n: int) -> dict:
    from attnexp.api import maps_source_pretrained
    from attnexp.heads import roles
    from attnexp.heads.probe import attention_maps
    from attnexp.maps import render

    texts = sentences(data / "test.jsonl.gz", n)
    src = maps_source_pretrained(str(model), texts, [])
    w = attention_maps(src.model, src.probe, src.pad_id)  # (L, B, H, T, T), padding zeroed
    scores = roles.pattern_scores(w, src.probe.lengths, src.probe.tokens, causal=False)
    assigned = roles.assign(scores)
    L, H = assigned.shape
    rows = []
    for layer in range(L):
        for head in range(H):
            role = str(assigned[layer, head])
            key = roles.THRESHOLDS[role][0] if role in roles.THRESHOLDS else None
            top = max(roles.SCORES, key=lambda k: -1 if k in ("broadness", "local") else scores[k][layer, head])
            rows.append({"layer": layer, "head": head, "role": role, "score": key and round(float(scores[key][layer, head]), 3),
                         "strongest_pattern": top, "strongest_share": round(float(scores[top][layer, head]), 3),
                         **{k: round(float(v[layer, head]), 3) for k, v in scores.items()}})
    title = f"all-MiniLM-L6-v2 on {len(texts)} 20 Newsgroups sentences"
    render.roles(assigned, scores, title).save(IMAGES / "minilm_roles.png")
    counts = {r: int((assigned == r).sum()) for r in [*roles.ROLES, "mixed"] if (assigned == r).any()}
    return {"model": str(model), "sentences": len(texts), "tokens": int(sum(src.probe.lengths)),
            "mean_tokens": round(float(np.mean(src.probe.lengths)), 1), "thresholds": roles.THRESHOLDS,
            "role_counts": counts, "heads": rows, "examples": texts[:5]}


def markdown(r: dict) -> str:
    lines = [f"# all-MiniLM-L6-v2's heads on {r['sentences']} 20 Newsgroups sentences", "",
             f"`python scripts/studies/minilm_heads.py`: {r['tokens']:,} tokens ({r['mean_tokens']} a sentence, [CLS] and [SEP] "
             "included). Scores are shares of each real query row's mass, averaged over rows (attnexp.heads.roles). "
             "A head's role is the first pattern whose score reaches its threshold "
             f"({', '.join(f'{k} {v[1]}' for k, v in r['thresholds'].items())}); else mixed.", "",
             "Role counts: " + ", ".join(f"{k} {v}" for k, v in r["role_counts"].items()), "",
             "| layer | head | role | score | strongest pattern | share | prev | next | self | [CLS] | [SEP] | punct | broad |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for h in r["heads"]:
        lines.append(f"| {h['layer']} | {h['head']} | {h['role']} | {h['score'] if h['score'] is not None else ''} | "
                     f"{h['strongest_pattern']} | {h['strongest_share']:.2f} | {h['prev_token']:.2f} | {h['next_token']:.2f} | "
                     f"{h['self']:.2f} | {h['to_first']:.2f} | {h['separator']:.2f} | {h['punctuation']:.2f} | "
                     f"{h['broadness']:.2f} |")
    return "\n".join(lines) + "\n"


def pictures(model: Path, data: Path, work: Path) -> dict:
    def maps(out: Path, *args: str) -> None:
        subprocess.run([sys.executable, "-m", "attnexp", "maps", f"hf={model}", f"out={out}", *args], cwd=REPO, check=True,
                       capture_output=True)

    maps(work / "pair", f"text={PAIR[0]}", f"text_pair={PAIR[1]}", "bertviz=true")
    shutil.copy(work / "pair" / "maps_ex0.png", IMAGES / "minilm_pair.png")
    screenshot((work / "pair" / "bertviz_head_view_ex0.html").as_uri(), IMAGES / "minilm_bertviz.png", "520,620")
    screenshot((work / "pair" / "viewer.html").as_uri() + "#layer=0&head=2", IMAGES / "minilm_viewer.png", "1100,900")
    post = next(b for b in bodies(data / "test.jsonl.gz") if 30 <= len(b.split()) <= 45)
    maps(work / "post", f"text={post}")
    shutil.copy(work / "post" / "maps_ex0.png", IMAGES / "minilm_post.png")
    screenshot((work / "post" / "viewer.html").as_uri() + "#view=rollout", IMAGES / "minilm_post_rollout.png", "1100,1000")
    return {"pair": list(PAIR), "post": post}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=300, help="sentences (one per post)")
    ap.add_argument("--model", type=Path, default=SHARED / "models" / "all-MiniLM-L6-v2")
    ap.add_argument("--data", type=Path, default=SHARED / "data" / "20newsgroups")
    ap.add_argument("--parts", default="heads,pictures")
    args = ap.parse_args()
    IMAGES.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "minilm_heads.json"
    report = json.loads(path.read_text()) if path.is_file() else {}
    if "heads" in args.parts:
        report.update(heads(args.model, args.data, args.n))
        (RESULTS / "minilm_heads.md").write_text(markdown(report))
        named = [h for h in report["heads"] if h["role"] != "mixed"]
        print(f"{report['sentences']} sentences; roles: {report['role_counts']}")
        for h in named:
            print(f"  L{h['layer']}H{h['head']}: {h['role']} {h['score']}")
    if "pictures" in args.parts:
        with scratch("minilm-maps-") as work:
            report["pictures"] = pictures(args.model, args.data, work)
    path.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
