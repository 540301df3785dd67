"""The shared example table (tests/seed_examples.py) against the DirectML pages' own text.

The seed pages (FOLD 1-3, UNFOLD 1-2, PADDING 1-4) are parsed independently of the table's
transcription; every field value, size and number must agree. The pages live in `shared/seeds`
beside (or inside) the checkout; a checkout without them has nothing to compare against.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.seed_examples import SEED_EXAMPLES

REPO = Path(__file__).resolve().parents[1]
SEED_DIRS = [
    REPO.parent / "shared" / "seeds",
    REPO / "shared" / "seeds",
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


def seed_dir() -> Path | None:
    for d in SEED_DIRS:
        if (d / "DML_FOLD_OPERATOR_DESC.md").is_file():
            return d
    return None


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


def seed_examples(pages: Path) -> list[SeedExample]:
    examples = []
    for op_type, count in PAGES.items():
        text = (pages / f"DML_{op_type}_OPERATOR_DESC.md").read_text()
        section = text.split("## Examples", 1)[1].split("## Availability", 1)[0]
        blocks = re.findall(r"```\n(.*?)```", section, flags=re.S)
        assert len(blocks) == count, f"{op_type}: expected {count} examples, found {len(blocks)}"
        for i, block in enumerate(blocks, 1):
            examples.append(_parse_block(op_type, block, f"{op_type}-{i}"))
    return examples


def test_example_table_matches_the_pages() -> None:
    pages = seed_dir()
    if pages is None:
        pytest.skip(
            "the DirectML reference pages (DML_*_OPERATOR_DESC.md from Microsoft's DirectML "
            "documentation) are not in shared/seeds/ beside or inside this checkout; this test "
            "only re-reads the examples from the pages' text, which every other test runs from "
            "tests/seed_examples.py"
        )
    parsed = {e.id.lower(): e for e in seed_examples(pages)}
    table_by_id = {"-".join(t.name.split("-")[:2]): t for t in SEED_EXAMPLES}
    assert parsed.keys() == table_by_id.keys()
    for key, page in parsed.items():
        table = table_by_id[key]
        op = {k: v for k, v in table.operator.items() if k != "InputTensor"}
        page_op = dict(page.operator)
        if "PaddingValue" in page_op and page_op.get("PaddingMode") != "DML_PADDING_MODE_CONSTANT":
            del page_op["PaddingValue"]  # given on every PADDING page example, used by CONSTANT
        assert page_op == op, table.name
        x = table.inputs["InputTensor"]
        assert list(x.shape) == page.input_sizes and x.dtype.name == page.data_type.lower()
        np.testing.assert_array_equal(x.ravel(), np.asarray(page.input_values, x.dtype))
        assert list(table.expected.shape) == page.output_sizes
        np.testing.assert_array_equal(table.expected.ravel(), page.output_values)
