"""``vllm-factory-prep``: turn a GLiNER checkpoint (gliner's ``save_pretrained`` layout) into
a directory that ``vllm serve`` loads directly.

    vllm-factory-prep --model SOURCE --output OUT_DIR [--architecture NAME]
                      [--io-processor NAME] [--force]
    vllm-factory-prep SOURCE OUT_DIR [...]        # the same, positional
    python -m vllm_factory.heads.gliner.prep ...

SOURCE is a checkpoint directory, or a Hugging Face Hub id (downloaded where a hub is
reachable, or read from the local cache). Other GLiNER-family layouts are prepared by the
package that serves them, found through the ``vllm_factory.prep`` entry points (GLiNER2's
``vllm-factory-gliner2``): each names an object with ``recognizes(directory)`` and
``prepare(source, out, force=...)``; the first that recognizes SOURCE writes OUT_DIR.

OUT_DIR gets ``config.json`` (the encoder's Hugging Face config from gliner_config.json, plus
``architectures`` = our model class and ``io_processor_plugin`` so that
``--io-processor-plugin`` is optional), ``gliner_config.json``, the weights and the tokenizer
files (and a bi-encoder's ``labels_tokenizer/`` folder). The architecture is looked up from
the installed GLiNER model packages: each declares ``GLINER_ENCODER_TYPES`` (encoder
``model_type`` values), ``ARCHITECTURE`` and ``IO_PROCESSOR`` in its package ``__init__``.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Protocol

from vllm_factory.core.config_format import Target, target_for
from vllm_factory.core.config_format import installed_targets as installed_targets_with
from vllm_factory.heads.gliner.settings import CONFIG_FILE, parse_settings

logger = logging.getLogger("vllm_factory.prep")

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
LABELS_TOKENIZER_DIR = "labels_tokenizer"  # a bi-encoder's label tokenizer (gliner's layout)
TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "added_tokens.json", "spm.model", "sentencepiece.bpe.model", "tokenizer.model",
    "spiece.model",  # T5 / mT5
    "vocab.txt", "vocab.json", "merges.txt", "chat_template.jinja",
)  # fmt: skip
COPY_CHUNK = 64 << 20
LARGE_FILE = 256 << 20


class PrepError(RuntimeError):
    """The input directory cannot be prepared; the message says why."""


# Which installed GLiNER model package serves which encoder model_type.
TARGETS_ATTRIBUTE = "GLINER_ENCODER_TYPES"


def installed_targets() -> dict[str, Target]:
    """Encoder model_type -> target, from the installed vllm-factory GLiNER model packages
    (each declares ``GLINER_ENCODER_TYPES``, ``ARCHITECTURE`` and ``IO_PROCESSOR``)."""
    return installed_targets_with(TARGETS_ATTRIBUTE)


def read_json(path: Path) -> dict:
    if not path.is_file():
        raise PrepError(f"{path} is missing")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise PrepError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise PrepError(f"{path} must hold a JSON object")
    return data


def copy_with_progress(source: Path, target: Path) -> None:
    size = source.stat().st_size
    if size < LARGE_FILE:
        shutil.copyfile(source, target)
        return
    done = 0
    next_report = 0.0
    with open(source, "rb") as src, open(target, "wb") as dst:
        while chunk := src.read(COPY_CHUNK):
            dst.write(chunk)
            done += len(chunk)
            if done / size >= next_report:
                logger.info(
                    "copying %s: %3.0f%% of %.1f GB", source.name, 100 * done / size, size / 1e9
                )
                next_report += 0.1
    shutil.copystat(source, target)


def find_target(model_type: str, targets: dict[str, Target] | None = None) -> Target:
    """The installed package (or one of ``targets``) that serves encoder ``model_type``."""
    known = installed_targets() if targets is None else targets
    try:
        return target_for(model_type, known, "GLiNER")
    except LookupError as error:
        raise PrepError(f"{error}; install one or pass --architecture and --io-processor") from None


def build_config(gliner_config: dict, target: Target) -> dict:
    """config.json for vLLM: the encoder config with our architecture and IOProcessor."""
    config = dict(gliner_config["encoder_config"])
    # gliner resizes the embeddings for its marker tokens; its vocab_size is the true one.
    if int(gliner_config.get("vocab_size", -1)) > 0:
        config["vocab_size"] = int(gliner_config["vocab_size"])
    config.pop("_name_or_path", None)
    # gliner runs only the encoder of an encoder-decoder config (T5): vLLM must not see one.
    if config.get("is_encoder_decoder"):
        config["is_encoder_decoder"] = False
    config["architectures"] = [target.architecture]
    config["io_processor_plugin"] = target.io_processor
    return config


def prepare(
    source: Path,
    out: Path,
    architecture: str | None = None,
    io_processor: str | None = None,
    force: bool = False,
    targets: dict[str, Target] | None = None,
) -> Path:
    """Write the served directory ``out`` from gliner checkpoint ``source``; returns ``out``."""
    source, out = Path(source), Path(out)
    if not source.is_dir():
        raise PrepError(f"{source} is not a directory")
    gliner_config = read_json(source / CONFIG_FILE)
    try:
        settings = parse_settings(gliner_config)
    except ValueError as error:
        raise PrepError(f"{source / CONFIG_FILE}: {error}") from None
    weights = [source / name for name in WEIGHT_FILES if (source / name).is_file()]
    if not weights:
        raise PrepError(f"{source} has no weights ({' or '.join(WEIGHT_FILES)})")
    tokenizer = [source / name for name in TOKENIZER_FILES if (source / name).is_file()]
    if not (source / "tokenizer_config.json").is_file():
        raise PrepError(f"{source} has no tokenizer (tokenizer_config.json is missing)")
    read_json(source / "tokenizer_config.json")

    model_type = settings.encoder_model_type
    if architecture is None or io_processor is None:
        found = find_target(model_type, targets)
        architecture = architecture or found.architecture
        io_processor = io_processor or found.io_processor
    target = Target(architecture, io_processor, "")

    if out.exists():
        if not force and any(out.iterdir()):
            raise PrepError(f"{out} exists and is not empty (use --force to overwrite)")
        if source.resolve() == out.resolve():
            raise PrepError("the output directory must differ from the input directory")
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(
        json.dumps(build_config(gliner_config, target), indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    shutil.copyfile(source / CONFIG_FILE, out / CONFIG_FILE)
    for path in [weights[0], *tokenizer]:  # safetensors preferred when both exist
        logger.info("copying %s", path.name)
        copy_with_progress(path, out / path.name)
    if settings.bi_encoder:  # gliner saves a bi-encoder's label tokenizer in a folder
        labels = source / LABELS_TOKENIZER_DIR
        if not (labels / "tokenizer_config.json").is_file():
            raise PrepError(f"{source} is a bi-encoder GLiNER without {LABELS_TOKENIZER_DIR}/")
        shutil.copytree(labels, out / LABELS_TOKENIZER_DIR, dirs_exist_ok=True)
    logger.info(
        "prepared %s: architecture %s, IOProcessor %s (encoder %s)",
        out, architecture, io_processor, model_type,
    )  # fmt: skip
    return out


# Entry points of other GLiNER-family layouts (see the module docstring).
PREPARERS_GROUP = "vllm_factory.prep"


class Preparer(Protocol):
    def recognizes(self, source: Path) -> bool: ...

    def prepare(self, source: Path, out: Path, *, force: bool = False) -> Path: ...


def preparers() -> list[tuple[str, Preparer]]:
    """The installed preparers of other layouts, by entry-point name."""
    found = []
    for ep in sorted(entry_points(group=PREPARERS_GROUP), key=lambda ep: ep.name):
        try:
            found.append((ep.name, ep.load()))
        except Exception as error:  # noqa: BLE001 - a broken package must not stop the others
            logger.warning("vllm-factory-prep: skipping %s (%s)", ep.name, error)
    return found


def local_checkpoint(source: str) -> Path:
    """``source`` as a local directory: itself, or a Hub id's snapshot (downloaded where a
    hub is reachable; with ``HF_HUB_OFFLINE=1``, the local cache)."""
    if Path(source).is_dir():
        return Path(source)
    if Path(source).exists() or source.startswith(("/", ".", "~")) or source.count("/") > 1:
        raise PrepError(f"{source} is not a directory (nor a Hugging Face Hub id)")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id=source))
    except Exception as error:  # noqa: BLE001 - hub errors vary by version and cause
        raise PrepError(
            f"{source} is not a local directory and could not be fetched from the Hugging "
            f"Face Hub ({type(error).__name__}: {error})"
        ) from None


def prepare_any(
    source: Path,
    out: Path,
    architecture: str | None = None,
    io_processor: str | None = None,
    force: bool = False,
) -> Path:
    """``out`` from checkpoint directory ``source``: a gliner checkpoint here, another layout
    by the installed preparer that recognizes it."""
    if (source / CONFIG_FILE).is_file():
        return prepare(source, out, architecture, io_processor, force)
    for name, preparer in preparers():
        if preparer.recognizes(source):
            if architecture or io_processor:
                raise PrepError(f"--architecture and --io-processor apply to gliner checkpoints, "
                                f"not to {name} ones")  # fmt: skip
            return preparer.prepare(source, out, force=force)
    kinds = ", ".join(["gliner", *(name for name, _ in preparers())])
    raise PrepError(
        f"{source} has no {CONFIG_FILE} and no installed preparer recognizes it "
        f"(installed: {kinds})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vllm-factory-prep", description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", help="checkpoint directory or Hub id")
    parser.add_argument("out", nargs="?", type=Path, help="directory to write (vllm serve OUT)")
    parser.add_argument("--model", help="checkpoint directory or Hub id (instead of SOURCE)")
    parser.add_argument("--output", type=Path, help="directory to write (instead of OUT)")
    parser.add_argument("--architecture", help="override the architecture name")
    parser.add_argument("--io-processor", help="override the IOProcessor plugin name")
    parser.add_argument("--force", action="store_true", help="overwrite a non-empty OUT")
    args = parser.parse_args(argv)
    for positional, option in (("source", "model"), ("out", "output")):
        given = [getattr(args, positional), getattr(args, option)]
        if all(v is not None for v in given) or all(v is None for v in given):
            parser.error(f"give {positional.upper()} or --{option} (one of them)")
    source = args.source if args.source is not None else args.model
    out = args.out if args.out is not None else args.output
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        prepare_any(local_checkpoint(source), out, args.architecture, args.io_processor,
                    args.force)  # fmt: skip
    except PrepError as error:
        logger.error("vllm-factory-prep: %s", error)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
