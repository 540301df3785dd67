"""The examples of the seed pages (FOLD 1-3, UNFOLD 1-2, PADDING 1-4), parsed from their text.

Each example becomes a `/v1` operator descriptor (with the page's field values and the
DirectML spellings the page uses), its input tensor and the page's expected output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SEED_DIRS = [
    REPO.parent / "shared" / "seeds",
    REPO / "shared" / "seeds",
    Path("/work/shared/seeds"),
]
PAGES = {"FOLD": 3, "UNFOLD": 2, "PADDING": 4}  # operator -> number of examples on its page

_TENSOR = re.compile(r"^(InputTensor|OutputTensor): \(Sizes:\{([^}]*)\}, DataType:(\w+)\)")
_FIELD = re.compile(r"^(\w+): (.*)$")
_NUMBER = re.compile(r"-?\d+(?:\.\d*)?")


@dataclass(frozen=True)
class SeedExample:
    id: str
    operator: dict[str, Any]
    data_type: str
    input_sizes: list[int]
    input_values: list[float]
    output_sizes: list[int]
    output_values: list[float]


def seed_dir() -> Path:
    for d in SEED_DIRS:
        if (d / "DML_FOLD_OPERATOR_DESC.md").is_file():
            return d
    raise FileNotFoundError(f"seed pages not found in any of {SEED_DIRS}")


def _value(text: str) -> Any:
    text = text.strip()
    if text.startswith("{"):
        return [int(v) for v in _NUMBER.findall(text)]
    if _NUMBER.fullmatch(text):
        return float(text) if "." in text else int(text)
    return text


def _parse_block(op_type: str, block: str, ident: str) -> SeedExample:
    operator: dict[str, Any] = {"type": op_type}
    tensors: dict[str, tuple[list[int], str, list[float]]] = {}
    current: str | None = None
    for line in block.splitlines():
        if not line.strip():
            continue
        m = _TENSOR.match(line)
        if m:
            current = m.group(1)
            sizes = [int(v) for v in _NUMBER.findall(m.group(2))]
            tensors[current] = (sizes, m.group(3), [])
            continue
        m = _FIELD.match(line)
        if m and not line.startswith(" "):
            current = None
            operator[m.group(1)] = _value(m.group(2))
            continue
        if current is not None:
            tensors[current][2].extend(float(v) for v in _NUMBER.findall(line))
    (in_sizes, in_type, in_values), (out_sizes, out_type, out_values) = (
        tensors["InputTensor"],
        tensors["OutputTensor"],
    )
    operator["OutputTensor"] = {"DataType": out_type, "Sizes": out_sizes}
    assert in_type == out_type
    return SeedExample(ident, operator, in_type, in_sizes, in_values, out_sizes, out_values)


def seed_examples() -> list[SeedExample]:
    examples = []
    for op_type, count in PAGES.items():
        text = (seed_dir() / f"DML_{op_type}_OPERATOR_DESC.md").read_text()
        section = text.split("## Examples", 1)[1].split("## Availability", 1)[0]
        blocks = re.findall(r"```\n(.*?)```", section, flags=re.S)
        assert len(blocks) == count, f"{op_type}: expected {count} examples, found {len(blocks)}"
        for i, block in enumerate(blocks, 1):
            examples.append(_parse_block(op_type, block, f"{op_type}-{i}"))
    return examples
