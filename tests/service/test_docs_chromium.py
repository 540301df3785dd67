"""The /docs page renders in a real browser with no network beyond the server itself.

Starts `dmlserve serve` in a subprocess, loads /docs in headless Debian Chromium and checks
that Swagger UI (served by the app, not a CDN) fetched /openapi.json and rendered every
operation, and that "Try it out" runs the request examples as they are. Skips only where
Chromium is not installed (CI installs it: apt-get install chromium).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.servers import ServerProcess
from tests.service.devtools import Browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """Base URL of a real `dmlserve serve` process on loopback (NumPy backend)."""
    process = ServerProcess("--backend", "numpy", clean_env=True)
    try:
        yield process.url
    finally:
        process.close()


def _render(url: str, profile: Path) -> str:
    """The DOM after Chromium ran the page's scripts (virtual time: no real waiting)."""
    assert CHROMIUM is not None
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={profile}", "--dump-dom",
        "--virtual-time-budget=10000", url,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done.stdout.decode()


def test_docs_page_loads_local_assets(server: str) -> None:
    html = httpx.get(f"{server}/docs", timeout=10).text
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html)
    assert assets, "the docs page references no scripts or styles"
    for asset in assets:
        assert asset.startswith("/"), f"/docs loads {asset} from outside the server"
        assert httpx.get(f"{server}{asset}", timeout=10).status_code == 200, asset


def test_swagger_ui_renders_every_operation(server: str, tmp_path: Path) -> None:
    spec = httpx.get(f"{server}/openapi.json", timeout=10).json()
    dom = _render(f"{server}/docs", tmp_path / "profile")

    rendered = set(re.findall(r'class="opblock-summary-path"[^>]*data-path="([^"]+)"', dom))
    rendered |= set(re.findall(r'data-path="([^"]+)"[^>]*class="opblock-summary-path"', dom))
    # The spec's own paths, so a route added later is covered too.
    assert set(spec["paths"]) <= rendered, sorted(set(spec["paths"]) - rendered)
    for path in ("/v1/execute", "/v1/operators", "/v2/health/ready", "/v2/models/{name}/infer"):
        assert path in rendered

    # One rendered operation block per method and path of the spec.
    blocks = re.findall(r'id="operations-(?!tag-)[^"]+"', dom)
    operations = sum(
        1 for item in spec["paths"].values() for method in item if method != "parameters"
    )
    assert len(blocks) == operations
    assert spec["info"]["title"] in dom


# Swagger UI as a user drives it: open the operation, "Try it out", pick each request example
# in turn, "Execute", and read the server's response from the page. Every wait is on a change
# of the page (a MutationObserver), never on time.
TRY_EVERY_EXAMPLE = """
async (path, method) => {
  const waitFor = (find) => new Promise((resolve) => {
    const hit = find();
    if (hit) return resolve(hit);
    const observer = new MutationObserver(() => {
      const found = find();
      if (found) { observer.disconnect(); resolve(found); }
    });
    observer.observe(document, {childList: true, subtree: true, attributes: true,
                                characterData: true});
  });
  const summary = await waitFor(() => document.querySelector(
    `.opblock-${method} .opblock-summary-path[data-path="${path}"]`));
  const block = summary.closest('.opblock');
  block.querySelector('.opblock-summary-control').click();
  (await waitFor(() => block.querySelector('.try-out__btn'))).click();
  const select = await waitFor(() => block.querySelector(
    '.opblock-section-request-body .examples-select select'));
  const setValue = Object.getOwnPropertyDescriptor(HTMLSelectElement.prototype, 'value').set;
  const results = {};
  for (const key of [...select.options].map((o) => o.value)) {
    setValue.call(select, key);
    select.dispatchEvent(new Event('change', {bubbles: true}));
    const body = await waitFor(() => {
      const area = block.querySelector('textarea.body-param__text');
      return area && area.value.includes(`"type": "${key}"`) ? area.value : null;
    });
    const clear = block.querySelector('.btn-clear');
    if (clear) {
      clear.click();
      await waitFor(() => !block.querySelector('.live-responses-table'));
    }
    block.querySelector('button.execute').click();
    const status = await waitFor(() => block.querySelector(
      '.live-responses-table .response .response-col_status'));
    const shown = await waitFor(() => block.querySelector(
      '.live-responses-table .response-col_description .highlight-code pre'));
    results[key] = {sent: body, status: status.textContent.trim(), body: shown.textContent};
  }
  return results;
}
"""


def test_try_it_out_runs_every_execute_example(server: str, tmp_path: Path) -> None:
    """In the rendered /docs, each /v1/execute example runs as it is and shows a 200."""
    spec = httpx.get(f"{server}/openapi.json", timeout=10).json()
    content = spec["paths"]["/v1/execute"]["post"]["requestBody"]["content"]["application/json"]
    examples = {key: example["value"] for key, example in content["examples"].items()}
    assert CHROMIUM is not None
    with Browser(CHROMIUM, tmp_path / "profile") as browser:
        browser.open(f"{server}/docs")
        results = browser.run(TRY_EVERY_EXAMPLE, "/v1/execute", "post")
    assert set(results) == set(examples)
    for key, shown in results.items():
        assert shown["status"] == "200", (key, shown)
        # the page sent the example unchanged, and showed what the server computes for it
        assert json.loads(shown["sent"]) == examples[key]
        direct = httpx.post(f"{server}/v1/execute", json=examples[key], timeout=30)
        assert json.loads(shown["body"]) == direct.json()
