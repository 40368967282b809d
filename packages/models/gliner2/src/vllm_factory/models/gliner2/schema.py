"""Every request form -> one :class:`SchemaPlan`: the schema dictionary the library's prompt
builder reads plus the per-task settings its decoder reads (pure Python, no vLLM).

gliner2 accepts a schema three ways, and they do not decode alike, so each keeps its own
semantics here:

- the dictionary ``Schema.to_dict()`` writes and ``Schema.from_dict()`` reads (``entities``,
  ``structures``, ``classifications``, ``relations``): per-entity / per-field / per-relation
  thresholds and ``dtype`` apply, relations asked for but not found come back as ``[]``;
- the dictionary ``create_schema()...build()`` produces (``json_structures``,
  ``entity_descriptions``, ...): passed to ``extract`` as a plain dict, it carries no per-item
  settings, so the global threshold and ``dtype="list"`` apply everywhere;
- the short forms of ``extract_entities``, ``classify_text``, ``extract_json`` and
  ``extract_relations`` (``"name::str::description"`` field specs and so on), which go through
  the library's schema builder like the first form.

Validation errors are ``ValueError``s whose message starts with the offending field's path
(``data.schema.structures.invoice.fields``); the IOProcessor turns them into 400 answers.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Keys only ``Schema.build()`` output has; a "schema" with none of them is the from_dict form.
BUILD_KEYS = frozenset(
    {"json_structures", "json_descriptions", "entity_descriptions", "relation_descriptions"}
)
FROM_DICT_KEYS = frozenset({"entities", "structures", "classifications", "relations"})
# Features the server refuses, with the reason (key -> why).
REFUSED = {
    "entity_attributes": "entity attribute groups are not supported by this server yet",
    "record_metadata": "record modes are a boundary-architecture feature; this server serves "
    "span checkpoints",
}
MAX_TASK_ITEMS = 256  # labels, fields, entity or relation types in one request
MAX_NAME_CHARS = 256
MAX_DESCRIPTION_CHARS = 2_000
MARKERS = ("[SEP_STRUCT]", "[SEP_TEXT]", "[P]", "[C]", "[E]", "[R]", "[L]", "[EXAMPLE]",
           "[OUTPUT]", "[DESCRIPTION]")  # fmt: skip


class SchemaError(ValueError):
    """A bad schema; ``field`` is the path a 400 answer names."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass
class SchemaPlan:
    """What the library's ``_build_schema_dicts_and_metadata`` returns for one schema."""

    schema: dict[str, Any]
    entity_metadata: dict[str, dict] = field(default_factory=dict)
    field_metadata: dict[str, dict] = field(default_factory=dict)
    relation_metadata: dict[str, dict] = field(default_factory=dict)
    field_orders: dict[str, list[str]] = field(default_factory=dict)
    entity_order: list[str] = field(default_factory=list)
    relation_order: list[str] = field(default_factory=list)

    @property
    def classification_tasks(self) -> list[str]:
        return [c["task"] for c in self.schema.get("classifications", [])]


# -- small checks ------------------------------------------------------------------------------


def _name(value: Any, path: str, noun: str = "name") -> str:
    """A non-blank :func:`_text` of at most ``MAX_NAME_CHARS``; errors name the ``noun``."""
    if isinstance(value, str) and not value.strip():
        raise SchemaError(path, f"{noun} must not be empty")
    return _text(value, path, MAX_NAME_CHARS, f"{noun} ")


def _text(value: Any, path: str, limit: int = MAX_DESCRIPTION_CHARS, subject: str = "") -> str:
    """``value`` when it is a string of at most ``limit`` characters without a prompt marker."""
    if not isinstance(value, str):
        raise SchemaError(path, f"{subject}must be a string")
    if len(value) > limit:
        raise SchemaError(path, f"{subject}must be at most {limit} characters")
    for marker in MARKERS:
        if marker in value:
            raise SchemaError(path, f"{subject}must not contain {marker!r}")
    return value


def _threshold(value: Any, path: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SchemaError(path, "must be a number between 0 and 1")
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise SchemaError(path, "must be a number between 0 and 1")
    return float(value)


def _dtype(value: Any, path: str) -> str:
    if value not in ("str", "list"):
        raise SchemaError(path, "must be 'str' or 'list'")
    return value


def _mapping(value: Any, path: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise SchemaError(path, "must be an object")
    return value


def _listed_objects(schema: Mapping, key: str, path: str) -> Iterator[tuple[str, Mapping]]:
    """``schema[key]``, a list of objects (absent: none), item by item with its path."""
    items = schema.get(key) or []
    if not isinstance(items, list):
        raise SchemaError(f"{path}.{key}", "must be a list")
    for i, item in enumerate(items):
        where = f"{path}.{key}[{i}]"
        yield where, _mapping(item, where)


def _items(value: Any, path: str, noun: str) -> list:
    if not isinstance(value, (list, tuple)):
        raise SchemaError(path, "must be a list")
    if not value:
        raise SchemaError(path, f"must hold at least one {noun}")
    if len(value) > MAX_TASK_ITEMS:
        raise SchemaError(path, f"at most {MAX_TASK_ITEMS} {noun}s")
    return list(value)


def _unique(names: Sequence[str], path: str, noun: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise SchemaError(path, f"duplicate {noun} {name!r}")
        seen.add(name)


def _only(config: Mapping, allowed: set[str], path: str) -> None:
    for key in config:
        if key in REFUSED:
            raise SchemaError(f"{path}.{key}", REFUSED[key])
        if key not in allowed:
            raise SchemaError(f"{path}.{key}", "unknown key")


# -- the library's schema builder, rewritten ----------------------------------------------------


class Builder:
    """The semantics of gliner2's ``Schema`` builder: ``build()`` dict plus metadata."""

    def __init__(self) -> None:
        self.plan = SchemaPlan(
            schema={
                "json_structures": [],
                "classifications": [],
                "entities": {},
                "relations": [],
                "json_descriptions": {},
                "entity_descriptions": {},
                "relation_descriptions": {},
            }
        )

    def entities(self, entity_types: Any, path: str) -> None:
        plan = self.plan
        for name, config in _named_configs(entity_types, path, "entity type", ENTITY_KEYS):
            plan.schema["entities"][name] = ""
            if name not in plan.entity_order:
                plan.entity_order.append(name)
            plan.entity_metadata[name] = {
                "dtype": config.get("dtype", "list"),
                "threshold": config.get("threshold"),
            }
            if "description" in config:
                plan.schema["entity_descriptions"][name] = config["description"]

    def relations(self, relation_types: Any, path: str) -> None:
        plan = self.plan
        for name, config in _named_configs(relation_types, path, "relation type", RELATION_KEYS):
            plan.schema["relations"].append({name: {"head": "", "tail": ""}})
            if name not in plan.relation_order:
                plan.relation_order.append(name)
            plan.field_orders[name] = ["head", "tail"]
            plan.relation_metadata[name] = {"threshold": config.get("threshold")}
            if config.get("description"):
                plan.schema["relation_descriptions"][name] = config["description"]

    def classification(
        self,
        task: str,
        labels: Any,
        path: str,
        multi_label: bool = False,
        cls_threshold: float = 0.5,
        top_k: int | None = None,
        **extra: Any,
    ) -> None:
        names, descriptions = _labels(labels, f"{path}.labels")
        config: dict[str, Any] = {
            "task": task,
            "labels": names,
            "multi_label": multi_label,
            "cls_threshold": cls_threshold,
            **extra,
        }
        if top_k is not None:
            config["top_k"] = top_k
        if descriptions:
            config["label_descriptions"] = descriptions
        self.plan.schema["classifications"].append(config)

    def structure(self, parent: str, fields: Sequence[dict]) -> None:
        """``fields``: dicts with name, dtype, choices, description, threshold."""
        plan = self.plan
        values: dict[str, Any] = {}
        descriptions: dict[str, str] = {}
        order: list[str] = []
        for spec in fields:
            name, choices = spec["name"], spec.get("choices")
            values[name] = {"value": "", "choices": choices} if choices else ""
            order.append(name)
            if spec.get("description"):
                descriptions[name] = spec["description"]
            plan.field_metadata[f"{parent}.{name}"] = {
                "dtype": spec.get("dtype", "list"),
                "threshold": spec.get("threshold"),
                "choices": choices,
            }
        plan.field_orders[parent] = order
        plan.schema["json_structures"].append({parent: values})
        if descriptions:
            plan.schema["json_descriptions"][parent] = descriptions


ENTITY_KEYS = {"description", "dtype", "threshold"}
RELATION_KEYS = {"description", "threshold"}
CLASSIFICATION_KEYS = {"labels", "multi_label", "cls_threshold", "top_k", "class_act", "prompt",
                       "examples"}  # fmt: skip


def _named_configs(
    value: Any, path: str, noun: str, allowed: set[str]
) -> list[tuple[str, dict[str, Any]]]:
    """Entity or relation types as the builder parses them: a name, a list of names, or a map
    of name -> description string or config dict."""
    if isinstance(value, str):
        return [(_name(value, path, noun), {})]
    if isinstance(value, (list, tuple)):
        names = [_name(v, f"{path}[{i}]", noun) for i, v in enumerate(_items(value, path, noun))]
        _unique(names, path, noun)
        return [(name, {}) for name in names]
    if isinstance(value, Mapping):
        if not value:
            raise SchemaError(path, f"must hold at least one {noun}")
        if len(value) > MAX_TASK_ITEMS:
            raise SchemaError(path, f"at most {MAX_TASK_ITEMS} {noun}s")
        out = []
        for name, config in value.items():
            where = f"{path}.{name}"
            _name(name, path, noun)
            if isinstance(config, str):
                out.append((name, {"description": _text(config, where)}))
            elif isinstance(config, Mapping):
                _only(config, allowed, where)
                parsed: dict[str, Any] = {}
                if config.get("description") is not None:
                    parsed["description"] = _text(config["description"], f"{where}.description")
                if config.get("dtype") is not None:
                    parsed["dtype"] = _dtype(config["dtype"], f"{where}.dtype")
                if config.get("threshold") is not None:
                    parsed["threshold"] = _threshold(config["threshold"], f"{where}.threshold")
                out.append((name, parsed))
            elif config is None:
                out.append((name, {}))
            else:
                raise SchemaError(where, "must be a description string or a config object")
        return out
    raise SchemaError(path, f"must be a {noun} name, a list of names or an object")


def _labels(value: Any, path: str) -> tuple[list[str], dict[str, str]]:
    """Classification labels: a list of names or a map label -> description."""
    if isinstance(value, Mapping):
        names = [_name(k, path, "label") for k in value]
        descriptions = {k: _text(v, f"{path}.{k}") for k, v in value.items()}
    else:
        names = [
            _name(v, f"{path}[{i}]", "label") for i, v in enumerate(_items(value, path, "label"))
        ]
        descriptions = {}
    if len(names) < 2:
        raise SchemaError(path, "a classification needs at least two labels")
    if len(names) > MAX_TASK_ITEMS:
        raise SchemaError(path, f"at most {MAX_TASK_ITEMS} labels")
    _unique(names, path, "label")
    return names, descriptions


def _classification_options(config: Mapping, path: str) -> dict[str, Any]:
    """The options of one classification task, checked as ``ClassificationInput`` does."""
    options: dict[str, Any] = {}
    if "multi_label" in config:
        if not isinstance(config["multi_label"], bool):
            raise SchemaError(f"{path}.multi_label", "must be true or false")
        options["multi_label"] = config["multi_label"]
    if "cls_threshold" in config:
        threshold = _threshold(config["cls_threshold"], f"{path}.cls_threshold")
        options["cls_threshold"] = 0.5 if threshold is None else threshold
    if config.get("top_k") is not None:
        top_k = config["top_k"]
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise SchemaError(f"{path}.top_k", "must be an integer >= 1")
        options["top_k"] = top_k
    if config.get("class_act") is not None:
        if config["class_act"] not in ("auto", "sigmoid", "softmax"):
            raise SchemaError(f"{path}.class_act", "must be 'auto', 'sigmoid' or 'softmax'")
        options["class_act"] = config["class_act"]
    if config.get("prompt") is not None:
        options["prompt"] = _text(config["prompt"], f"{path}.prompt")
    if config.get("examples") is not None:
        examples = _items(config["examples"], f"{path}.examples", "example")
        pairs = []
        for i, pair in enumerate(examples):
            where = f"{path}.examples[{i}]"
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise SchemaError(where, "must be an [input, label] pair")
            pairs.append((_text(pair[0], where), _text(pair[1], where)))
        options["examples"] = pairs
    return options


# -- request forms ----------------------------------------------------------------------------------


def _field_spec_from_string(spec: str, path: str) -> dict[str, Any]:
    """``"name::str::description"``, ``"name::[a|b]::list"``: ``extract_json``'s field specs."""
    parts = spec.split("::")
    out: dict[str, Any] = {"name": _name(parts[0], path, "field name"), "dtype": "list"}
    explicit = False
    for part in parts[1:]:
        if part in ("str", "list"):
            out["dtype"], explicit = part, True
        elif part.startswith("[") and part.endswith("]"):
            out["choices"] = [c.strip() for c in part[1:-1].split("|")]
            for i, choice in enumerate(out["choices"]):
                _name(choice, f"{path}.choices[{i}]", "choice")
            if not explicit:
                out["dtype"] = "str"
        else:
            out["description"] = _text(part, path)
    return out


def _field_spec(spec: Any, path: str, with_threshold: bool) -> dict[str, Any]:
    if isinstance(spec, str):
        return _field_spec_from_string(spec, path)
    config = _mapping(spec, path)
    allowed = {"name", "dtype", "choices", "description"} | (
        {"threshold"} if with_threshold else set()
    )
    refused = {"cardinality", "exclusive"}
    for key in config:
        if key in refused:
            raise SchemaError(f"{path}.{key}", REFUSED["record_metadata"])
        if key not in allowed:
            raise SchemaError(f"{path}.{key}", "unknown key")
    if "name" not in config:
        raise SchemaError(f"{path}.name", "field required")
    out: dict[str, Any] = {
        "name": _name(config["name"], f"{path}.name", "field name"),
        "dtype": _dtype(config.get("dtype", "list"), f"{path}.dtype"),
    }
    if config.get("choices") is not None:
        choices = _items(config["choices"], f"{path}.choices", "choice")
        out["choices"] = [_name(c, f"{path}.choices[{i}]", "choice") for i, c in enumerate(choices)]
    if config.get("description") is not None:
        out["description"] = _text(config["description"], f"{path}.description")
    if with_threshold and config.get("threshold") is not None:
        out["threshold"] = _threshold(config["threshold"], f"{path}.threshold")
    return out


def _structures(builder: Builder, value: Any, path: str, from_dict: bool) -> None:
    structures = _mapping(value, path)
    if not structures:
        raise SchemaError(path, "must hold at least one structure")
    if len(structures) > MAX_TASK_ITEMS:
        raise SchemaError(path, f"at most {MAX_TASK_ITEMS} structures")
    for parent, body in structures.items():
        where = f"{path}.{parent}"
        _name(parent, path, "structure name")
        if from_dict:
            body = _mapping(body, where)
            for key in body:
                if key in ("mode", "anchor", "occurrence_policy"):
                    if body[key] is not None:
                        raise SchemaError(f"{where}.{key}", REFUSED["record_metadata"])
                elif key != "fields":
                    raise SchemaError(f"{where}.{key}", "unknown key")
            if "fields" not in body:
                raise SchemaError(f"{where}.fields", "field required")
            specs, fields_path = body["fields"], f"{where}.fields"
        else:
            specs, fields_path = body, where
        specs = _items(specs, fields_path, "field")
        fields = [
            _field_spec(s, f"{fields_path}[{i}]", with_threshold=from_dict)
            for i, s in enumerate(specs)
        ]
        _unique([f["name"] for f in fields], fields_path, "field")
        builder.structure(parent, fields)


def _classifications_from_dict(builder: Builder, value: Any, path: str) -> None:
    tasks = _items(value, path, "classification")
    names = []
    for i, config in enumerate(tasks):
        where = f"{path}[{i}]"
        config = _mapping(config, where)
        _only(config, CLASSIFICATION_KEYS | {"task"}, where)
        if "task" not in config:
            raise SchemaError(f"{where}.task", "field required")
        if "labels" not in config:
            raise SchemaError(f"{where}.labels", "field required")
        task = _name(config["task"], f"{where}.task", "task name")
        names.append(task)
        builder.classification(
            task, config["labels"], where, **_classification_options(config, where)
        )
    _unique(names, path, "classification task")


def _classifications_short(builder: Builder, value: Any, path: str) -> None:
    """``classify_text(text, tasks)``: {task: labels | {"labels": ..., options}}."""
    tasks = _mapping(value, path)
    if not tasks:
        raise SchemaError(path, "must hold at least one classification task")
    for task, config in tasks.items():
        where = f"{path}.{task}"
        _name(task, path, "task name")
        if isinstance(config, Mapping) and "labels" in config:
            _only(config, CLASSIFICATION_KEYS, where)
            options = _classification_options(config, where)
            builder.classification(task, config["labels"], where, **options)
        else:
            builder.classification(task, config, where)


def from_dict_form(schema: Mapping, path: str) -> SchemaPlan:
    """``Schema.from_dict(schema)`` (the ``Schema.to_dict()`` form)."""
    for key in schema:
        if key in REFUSED:
            raise SchemaError(f"{path}.{key}", REFUSED[key])
        if key not in FROM_DICT_KEYS:
            raise SchemaError(f"{path}.{key}", "unknown schema key")
    builder = Builder()
    if schema.get("entities") is not None:
        builder.entities(schema["entities"], f"{path}.entities")
    if schema.get("structures") is not None:
        _structures(builder, schema["structures"], f"{path}.structures", from_dict=True)
    if schema.get("classifications") is not None:
        _classifications_from_dict(builder, schema["classifications"], f"{path}.classifications")
    if schema.get("relations") is not None:
        builder.relations(schema["relations"], f"{path}.relations")
    return builder.plan


def short_form(kind: str, value: Any, path: str) -> SchemaPlan:
    """The schema ``extract_entities`` / ``classify_text`` / ``extract_json`` /
    ``extract_relations`` build from their argument."""
    builder = Builder()
    if kind == "entities":
        builder.entities(value, path)
    elif kind == "relations":
        builder.relations(value, path)
    elif kind == "classifications":
        _classifications_short(builder, value, path)
    elif kind == "structures":
        _structures(builder, value, path, from_dict=False)
    else:  # pragma: no cover - the request model names the kinds
        raise SchemaError(path, f"unknown schema kind {kind!r}")
    return builder.plan


def build_form(schema: Mapping, path: str) -> SchemaPlan:
    """A ``Schema.build()`` dict passed as is: checked for shape, no per-item settings."""
    allowed = BUILD_KEYS | {"entities", "classifications", "relations"}
    for key in schema:
        if key in REFUSED:
            raise SchemaError(f"{path}.{key}", REFUSED[key])
        if key not in allowed:
            raise SchemaError(f"{path}.{key}", "unknown schema key")
    out: dict[str, Any] = {}
    out["json_structures"] = []
    for where, item in _listed_objects(schema, "json_structures", path):
        checked = {}
        for parent, fields in item.items():
            _name(parent, where, "structure name")
            fields = _mapping(fields, f"{where}.{parent}")
            if not fields:
                raise SchemaError(f"{where}.{parent}", "must hold at least one field")
            values = {}
            for name, value in fields.items():
                _name(name, f"{where}.{parent}", "field name")
                if isinstance(value, Mapping) and "choices" in value:
                    choices = _items(value["choices"], f"{where}.{parent}.{name}.choices", "choice")
                    for j, c in enumerate(choices):
                        _name(c, f"{where}.{parent}.{name}.choices[{j}]", "choice")
                    value = {"value": value.get("value", ""), "choices": list(choices)}
                elif value not in ("", None):
                    raise SchemaError(f"{where}.{parent}.{name}", "must be '' or a choices object")
                values[name] = value
            checked[parent] = values
        out["json_structures"].append(checked)
    entities = schema.get("entities") or {}
    if isinstance(entities, list):
        entities = {e: "" for e in entities}
    entities = _mapping(entities, f"{path}.entities")
    for name in entities:
        _name(name, f"{path}.entities", "entity type")
    out["entities"] = dict(entities)
    out["relations"] = []
    for where, item in _listed_objects(schema, "relations", path):
        for name, fields in item.items():
            _name(name, where, "relation type")
            fields = _mapping(fields, f"{where}.{name}")
            if not fields:
                raise SchemaError(f"{where}.{name}", "must name its fields")
            for fname in fields:
                _name(fname, f"{where}.{name}", "field name")
        out["relations"].append(dict(item))
    out["classifications"] = []
    for where, config in _listed_objects(schema, "classifications", path):
        _only(config, CLASSIFICATION_KEYS | {"task", "label_descriptions", "true_label"}, where)
        if "task" not in config or "labels" not in config:
            raise SchemaError(where, "needs 'task' and 'labels'")
        task = _name(config["task"], f"{where}.task", "task name")
        labels = config["labels"]
        if not isinstance(labels, list):
            raise SchemaError(f"{where}.labels", "must be a list in a build() schema")
        names, _ = _labels(labels, f"{where}.labels")
        item = {"task": task, "labels": names, **_classification_options(config, where)}
        if config.get("label_descriptions"):
            descs = _mapping(config["label_descriptions"], f"{where}.label_descriptions")
            item["label_descriptions"] = {
                k: _text(v, f"{where}.label_descriptions.{k}") for k, v in descs.items()
            }
        out["classifications"].append(item)
    for key in ("json_descriptions", "entity_descriptions", "relation_descriptions"):
        value = schema.get(key) or {}
        value = _mapping(value, f"{path}.{key}")
        if key == "json_descriptions":
            out[key] = {
                p: {
                    f: _text(d, f"{path}.{key}.{p}.{f}")
                    for f, d in _mapping(v, f"{path}.{key}.{p}").items()
                }
                for p, v in value.items()
            }
        else:
            out[key] = {k: _text(v, f"{path}.{key}.{k}") for k, v in value.items()}
    plan = SchemaPlan(schema=out)
    plan.entity_order = list(out["entities"])
    return plan


def is_build_form(schema: Mapping) -> bool:
    return any(key in schema for key in BUILD_KEYS)


def plan_for(schema: Mapping, path: str = "data.schema") -> SchemaPlan:
    """The plan of a ``schema`` value (either dictionary form)."""
    schema = _mapping(schema, path)
    plan = build_form(schema, path) if is_build_form(schema) else from_dict_form(schema, path)
    check_tasks(plan, path)
    return plan


def check_tasks(plan: SchemaPlan, path: str) -> None:
    """At least one task, and no two tasks answering under the same result key."""
    schema = plan.schema
    keys: list[str] = []
    for item in schema.get("json_structures", []):
        keys += [p for p in item if p not in keys]
    if schema.get("entities"):
        keys.append("entities")
    relation_keys: list[str] = []
    for item in schema.get("relations", []):
        relation_keys += [r for r in item if r not in relation_keys]
    keys += relation_keys
    keys += [c["task"] for c in schema.get("classifications", [])]
    if not keys:
        raise SchemaError(path, "the schema asks for nothing (no entities, structures, "
                          "classifications or relations)")  # fmt: skip
    _unique(keys, path, "task name (structures, relations, classifications and 'entities' "
            "share one result namespace)")  # fmt: skip
    if len(keys) > MAX_TASK_ITEMS:
        raise SchemaError(path, f"at most {MAX_TASK_ITEMS} tasks")
