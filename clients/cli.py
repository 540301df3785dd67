"""`dmlserve-client`: run one operator on .npy files, or ask a service whether it is up.

    dmlserve-client run --url http://127.0.0.1:8000 --operator op.json \\
        --input InputTensor=x.npy --output y.npy
    dmlserve-client health --url http://127.0.0.1:8000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._client import Client
from ._exceptions import APIConnectionError, APIStatusError, DmlserveError

DEFAULT_URL = "http://127.0.0.1:8000"
OPERATOR_FILE_HELP = """\
The operator file holds one DirectML operator descriptor as JSON: "type" plus DirectML's
field names (the DirectML reference pages are the field reference), for example
  {"type": "PADDING", "PaddingMode": "REFLECTION",
   "StartPadding": [0, 0, 1, 1], "EndPadding": [0, 0, 1, 1]}
Input tensor descriptors may be left out: each --input array's dtype and shape stand for
them. A whole /v1/execute request body ({"operator": {...}, ...}) is accepted too.
Arrays are [N, C, spatial...] (PADDING: any rank)."""


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url",
        default=os.environ.get("DMLSERVE_URL", DEFAULT_URL),
        help="service base URL (env DMLSERVE_URL; default %(default)s)",
    )
    common.add_argument(
        "--api-key",
        default=os.environ.get("DMLSERVE_API_KEY"),
        help="bearer API key (env DMLSERVE_API_KEY)",
    )
    common.add_argument("--timeout", type=float, default=600.0, help="seconds (default 600)")

    parser = argparse.ArgumentParser(
        prog="dmlserve-client", description="Run DirectML operators on a dmlserve service."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run",
        parents=[common],
        help="execute one operator on .npy files",
        description="Execute one DirectML operator on the service and save its output.",
        epilog=OPERATOR_FILE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "--operator",
        required=True,
        help="operator descriptor JSON file, see below ('-' reads standard input)",
    )
    run.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=FILE.npy",
        help="an input tensor, e.g. InputTensor=x.npy (repeat for FilterTensor, ...)",
    )
    run.add_argument(
        "--output",
        required=True,
        help="where to write OutputTensor (.npy); other outputs go beside it as NAME.npy",
    )
    run.add_argument(
        "--encoding",
        choices=("binary", "json"),
        default="binary",
        help="how tensors travel: binary (KServe v2 binary framing, fastest) or json "
        "(base64 inside JSON); default %(default)s",
    )
    commands.add_parser(
        "health",
        parents=[common],
        help="liveness and readiness",
        description='Print {"live": ..., "ready": ...}; exit 0 only when both are true.',
    )
    return parser


def _read_operator(path: str) -> dict[str, Any]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    operator = json.loads(text)
    # Accept a whole /v1/execute-style body too, as saved from a curl example.
    if isinstance(operator, dict) and "type" not in operator and "operator" in operator:
        operator = operator["operator"]
    if not isinstance(operator, dict):
        raise ValueError(f"{path}: an operator is a JSON object")
    return operator


def _read_inputs(specs: Sequence[str]) -> dict[str, np.ndarray[Any, Any]]:
    inputs = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--input takes NAME=FILE.npy, got {spec!r}")
        inputs[name] = np.load(path, allow_pickle=False)
    return inputs


def _run(args: argparse.Namespace) -> int:
    operator = _read_operator(args.operator)
    inputs = _read_inputs(args.input)
    with Client(args.url, api_key=args.api_key, timeout=args.timeout) as client:
        outputs = client.execute(operator, inputs, encoding=args.encoding)
    target = Path(args.output)
    for name, array in outputs.items():
        path = target if name == "OutputTensor" else target.with_name(f"{name}.npy")
        np.save(path, array, allow_pickle=False)
        sys.stderr.write(f"{name}: {array.dtype} {list(array.shape)} -> {path}\n")
    return 0


def _health(args: argparse.Namespace) -> int:
    with Client(args.url, api_key=args.api_key, timeout=args.timeout, max_retries=0) as client:
        status = {"live": client.health(), "ready": client.ready()}
    sys.stdout.write(json.dumps(status) + "\n")
    return 0 if status["live"] and status["ready"] else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `dmlserve-client`; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        return _run(args) if args.command == "run" else _health(args)
    except APIStatusError as err:
        sys.stderr.write(f"error: {err}\n")
        for item in err.errors:
            loc = ".".join(str(p) for p in item.get("loc", ()))
            sys.stderr.write(f"  {loc}: {item.get('msg')}\n")
        return 1
    except APIConnectionError as err:
        sys.stderr.write(f"error: {err} ({args.url})\n")
        return 2
    except (DmlserveError, OSError, ValueError) as err:
        sys.stderr.write(f"error: {err}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
