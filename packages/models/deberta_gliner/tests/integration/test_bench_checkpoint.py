"""The bench checkpoints' levelling of per-text score offsets (``level_text_offsets`` in the
kit's ``scripts/gliner_checkpoint.py``), on this package's tiny checkpoint in the gliner venv.

A random encoder gives each text's span vectors a large mean of its own, which moves every
score of that text together: calibrated on the overall density alone, 115 of 128 bench texts
had no entity and the rest one in every other word. After levelling, every fit text's mean
span score is the same for every label, and the spans still score apart within a text.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from vllm_factory.testing.gliner.references import CORPUS, gliner_env

SCRIPT = """
import json, random, sys
import torch
from gliner import GLiNER
from gliner_checkpoint import level_text_offsets, run_one

torch.set_num_threads(1)  # a tiny model: threads only contend (0.7 s a pass on 2 busy cores)
checkpoint, corpus, fit, out = sys.argv[1:]
corpus = json.loads(open(corpus).read())
labels = corpus["label_sets"]["5"]
model = GLiNER.from_pretrained(checkpoint, local_files_only=True).eval()
# Coordinate 0 is the calibration's constant, which levelling leaves to calibrate_density (it
# makes the coordinate the same for every span and label): zeroed here, it adds nothing.
with torch.no_grad():
    model.model.prompt_rep_layer[-1].weight[0].zero_()
    model.model.prompt_rep_layer[-1].bias[0].zero_()
words = [w for t in corpus["texts"] for w in t.split()]
rng = random.Random(0)
texts = [" ".join(rng.choice(words) for _ in range(rng.randrange(12, 30))) for _ in range(24)]

@torch.no_grad()
def figures(texts):  # per text x label: mean and std of the logits of its valid spans
    means, stds = [], []
    for text in texts:
        output, valid = run_one(model, text, labels)
        logits = output.logits[0][valid].double()
        means.append(logits.mean(0).tolist())
        stds.append(logits.std(0).tolist())
    return {"means": means, "stds": stds}

result = {"before": figures(texts)}
try:
    level_text_offsets(model, texts * 4, labels)  # 96 texts, 95 span coordinates
except ValueError as error:
    result["too_many_texts"] = str(error)
result["report"] = level_text_offsets(model, texts[: int(fit)], labels)
result["after"] = figures(texts)
open(out, "w").write(json.dumps(result))
"""
FIT = 16  # the first FIT texts fit the levelling; the rest are texts it has not seen


def spread(figures: dict, rows: slice) -> tuple[float, float]:
    """Over the texts ``rows``: the largest std over texts of a label's mean logit, and the
    mean within-text std of a label's logits."""
    means, stds = figures["means"][rows], figures["stds"][rows]
    across = max(statistics.stdev(column) for column in zip(*means, strict=True))
    return across, statistics.fmean(v for row in stds for v in row)


def test_levelling_gives_every_fit_text_the_same_mean_score(reference_dir: Path, tmp_path: Path):
    script, out = tmp_path / "level.py", tmp_path / "result.json"
    script.write_text(SCRIPT)
    gliner_env().ensure().run(script, reference_dir / "checkpoint", CORPUS, FIT, out)
    result = json.loads(out.read_text())
    fit, held_out = slice(None, FIT), slice(FIT, None)
    across_before, within_before = spread(result["before"], fit)
    across_after, within_after = spread(result["after"], fit)
    unseen_before, unseen_after = (
        spread(result[when], held_out)[0] for when in ("before", "after")
    )
    print(f"\nlevelling {result['report']}\nfit texts: per-text mean std {across_before:.4f} -> "
          f"{across_after:.2e}, within-text std {within_before:.4f} -> {within_after:.4f}; "
          f"held-out texts: per-text mean std {unseen_before:.4f} -> {unseen_after:.4f}")  # fmt: skip
    assert across_before > 0.2 * within_before, result["before"]
    assert across_after < 1e-3 * within_after, result["after"]
    assert within_after > 0.2 * within_before
    assert unseen_after < 0.25 * unseen_before  # texts like the fit ones level too, if less
    assert result["report"]["directions_removed"] == FIT  # their overall mean lies in their span
    assert "leave no span coordinates" in result.get("too_many_texts", ""), result
