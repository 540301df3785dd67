"""Deployment invariants that schema validation cannot see; run by .ci/lint-deploy.

    python deploy/check_manifests.py RENDERED.yaml...   (the output of `kubectl kustomize`)

Checks that every DMLSERVE_* name in the manifests, compose.yaml and the Dockerfile is a
field of service.settings.Settings; that each Deployment keeps the hardening, probes and
shutdown ordering the deploy guide promises (grace period > preStop sleep + drain >= request
limit); that GPU Deployments ask for exactly one GPU and tolerate the GPU taint; and that
every metric an autoscaler uses is exported by service/metrics.py and published by the
Prometheus adapter rules. Prints one line per check; exits 1 if any fails.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from dmlserve.service.settings import Settings  # noqa: E402

failures: list[str] = []


def check(ok: bool, what: str) -> None:
    sys.stdout.write(f"{'ok  ' if ok else 'FAIL'} {what}\n")
    if not ok:
        failures.append(what)


def load(paths: list[str]) -> list[dict[str, Any]]:
    docs = []
    for path in paths:
        docs += [d for d in yaml.safe_load_all(Path(path).read_text()) if d]
    return docs


def check_settings(docs: list[dict[str, Any]]) -> None:
    known = {f"DMLSERVE_{name.upper()}" for name in Settings.model_fields}
    named: dict[str, set[str]] = {}
    for doc in docs:
        if doc["kind"] == "ConfigMap":
            for key in doc.get("data", {}):
                named.setdefault(key, set()).add(f"ConfigMap {doc['metadata']['name']}")
    for rel in ("compose.yaml", "Dockerfile", "deploy/k8s/base/deployment.yaml"):
        for key in re.findall(r"\bDMLSERVE_[A-Z0-9_]+", (REPO / rel).read_text()):
            named.setdefault(key, set()).add(rel)
    named = {k: v for k, v in named.items() if k.startswith("DMLSERVE_")}
    for key, where in sorted(named.items()):
        if key not in known:
            check(False, f"{key} ({', '.join(sorted(where))}) is not a setting of Settings")
    check(set(named) <= known, f"{len(named)} DMLSERVE_* names, all fields of Settings")


def _seconds(config: dict[str, str], key: str) -> float:
    default = Settings.model_fields[key.removeprefix("DMLSERVE_").lower()].default
    return float(config.get(key, default))


def check_deployment(dep: dict[str, Any], configs: dict[str, dict[str, str]]) -> None:
    name = dep["metadata"]["name"]
    pod = dep["spec"]["template"]["spec"]
    psc = pod.get("securityContext", {})
    check(psc.get("runAsNonRoot") is True, f"{name}: pod runAsNonRoot")
    check(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", f"{name}: seccomp")
    for c in pod["containers"]:
        sc = c.get("securityContext", {})
        where = f"{name}/{c['name']}"
        check(sc.get("allowPrivilegeEscalation") is False, f"{where}: no privilege escalation")
        check(sc.get("readOnlyRootFilesystem") is True, f"{where}: read-only root filesystem")
        check("ALL" in sc.get("capabilities", {}).get("drop", []), f"{where}: drops ALL")
        check(
            bool(c.get("resources", {}).get("limits", {}).get("memory")), f"{where}: memory limit"
        )
        probes = {p: c.get(p, {}).get("httpGet", {}).get("path") for p in
                  ("startupProbe", "readinessProbe", "livenessProbe")}  # fmt: skip
        check(
            probes == {"startupProbe": "/v2/health/ready", "readinessProbe": "/v2/health/ready",
                       "livenessProbe": "/v2/health/live"},
            f"{where}: probes {probes}",
        )  # fmt: skip
        mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
        check("/tmp" in mounts, f"{where}: writable /tmp")
        config: dict[str, str] = {}
        for ref in c.get("envFrom", []):
            config |= configs.get(ref.get("configMapRef", {}).get("name", ""), {})
        if config.get("DMLSERVE_BACKEND") == "cupy":
            cache = config.get("DMLSERVE_CUPY_CACHE_DIR")
            check(cache in mounts, f"{where}: kernel cache {cache} is a writable mount")
            gpus = c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
            check(gpus == 1, f"{where}: one GPU per pod (limit {gpus})")
            tolerates = any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", []))
            check(tolerates, f"{where}: tolerates the nvidia.com/gpu taint")
        sleep = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
        pre_stop = float(sleep[1]) if sleep[:1] == ["sleep"] else 0.0
        check(pre_stop > 0, f"{where}: preStop sleep ({pre_stop:g} s)")
        request = _seconds(config, "DMLSERVE_REQUEST_TIMEOUT_S")
        drain = _seconds(config, "DMLSERVE_SHUTDOWN_TIMEOUT_S")
        grace = float(pod.get("terminationGracePeriodSeconds", 30))
        check(
            grace > pre_stop + drain and drain >= request,
            f"{where}: grace {grace:g} s > preStop {pre_stop:g} s + drain {drain:g} s; "
            f"drain >= request limit {request:g} s",
        )


def check_metrics(docs: list[dict[str, Any]]) -> None:
    source = (REPO / "service/metrics.py").read_text()
    exported = set(re.findall(r'"((?:nv|dmlserve)_[a-z_]+)"', source))
    adapter = yaml.safe_load(
        (REPO / "deploy/k8s/optional/prometheus-adapter-values.yaml").read_text()
    )
    published = {rule["name"]["as"] for rule in adapter["rules"]["custom"]}
    check(published <= exported, f"adapter rules publish exported metrics ({sorted(published)})")
    for doc in docs:
        if doc["kind"] != "HorizontalPodAutoscaler":
            continue
        for metric in doc["spec"].get("metrics", []):
            if metric["type"] == "Pods":
                m = metric["pods"]["metric"]["name"]
                what = f"{doc['metadata']['name']}: HPA metric {m} exported and published"
                check(m in exported and m in published, what)


def main(paths: list[str]) -> int:
    docs = load(paths)
    configs = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    check_settings(docs)
    for dep in (d for d in docs if d["kind"] == "Deployment"):
        check_deployment(dep, configs)
    check_metrics(docs)
    sys.stdout.write(f"{len(failures)} failed\n" if failures else "all invariants hold\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
