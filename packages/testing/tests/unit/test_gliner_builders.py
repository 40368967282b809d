"""The GLiNER variants' checkpoint builders (``scripts/gliner_token_checkpoint.py``, run with a
package's ``reference/build_checkpoint.py`` as ``--builder``) read three names from the
package's builder: every GLiNER package's builder must define them, whichever way (a ``def``,
an assignment or an import). Read from the source, as the builders run in the reference venv."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
NEEDED = {"SIZES", "train_tokenizer", "build_backbone"}


def module_names(source: str) -> set[str]:
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom):
            names |= {alias.asname or alias.name for alias in node.names}
    return names


def test_every_gliner_builder_gives_what_the_variant_builders_read():
    builders = [
        path
        for path in sorted(ROOT.glob("packages/models/*/reference/build_checkpoint.py"))
        if "from gliner_checkpoint import main" in path.read_text(encoding="utf-8")
    ]
    assert len(builders) >= 3  # deberta_gliner, mmbert_gliner, mt5_gliner
    missing = {
        path.parent.parent.name: NEEDED - module_names(path.read_text(encoding="utf-8"))
        for path in builders
    }
    assert {name: names for name, names in missing.items() if names} == {}
