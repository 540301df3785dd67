"""Deployment invariants that schema validation cannot see; run by .ci/lint-deploy.

    python deploy/check_manifests.py RENDERED.yaml...   (the output of `kubectl kustomize`)

Checks that every DMLSERVE_* name in the manifests, compose.yaml, the KServe runtime and the
Dockerfile is a field of service.settings.Settings; that each Deployment keeps the hardening,
probes and shutdown ordering the deploy guide promises (grace period > preStop sleep + drain >=
request limit); that GPU Deployments ask for exactly one GPU and tolerate the GPU taint; that
every metric an autoscaler uses is exported by service/metrics.py and published by the
Prometheus adapter rules; that the model repository (deploy/models/) registers as the service
would at start-up, that its kustomization lists every file and that each Deployment and the
compose services mount it where DMLSERVE_MODEL_REPOSITORY points; and that the KServe
ServingRuntime and InferenceService (deploy/kserve/) validate against KServe's CRD schemas
(vendored in deploy/schemas/, unknown fields refused as `kubectl apply` does) and agree with
each other. Prints one line per check; exits 1 if any fails.
"""

from __future__ import annotations

import gzip
import json
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
    kserve = [str(p.relative_to(REPO)) for p in sorted((REPO / "deploy/kserve").glob("*.yaml"))]
    for rel in ("compose.yaml", "Dockerfile", "deploy/k8s/base/deployment.yaml", *kserve):
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
        check_repository_mount(where, pod, c, config, configs)
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


MODELS = REPO / "deploy/models"


def check_models() -> None:
    """The example repository registers as start-up would, and kustomize ships every file."""
    from dmlserve.service.repository import RepositoryError, check_repository

    try:
        check_repository(Settings(model_repository=MODELS, model_control="none"))
        check(True, f"deploy/models: {len(list(MODELS.glob('*.json')))} models register")
    except RepositoryError as exc:
        check(False, f"deploy/models: {exc}")
    kustomization = yaml.safe_load((MODELS / "kustomization.yaml").read_text())
    listed = {f for g in kustomization["configMapGenerator"] for f in g.get("files", [])}
    files = {p.name for p in MODELS.glob("*.json")}
    check(
        listed == files, f"deploy/models/kustomization.yaml lists every model file {sorted(files)}"
    )


def check_repository_mount(
    where: str, pod: dict[str, Any], c: dict[str, Any], config: dict[str, str],
    configs: dict[str, dict[str, str]],
) -> None:  # fmt: skip
    """The container mounts the models ConfigMap, all of it, where the settings point."""
    path = config.get("DMLSERVE_MODEL_REPOSITORY")
    mount = next((m for m in c.get("volumeMounts", []) if m["mountPath"] == path), None)
    volume = next((v for v in pod.get("volumes", []) if mount and v["name"] == mount["name"]), {})
    cm = volume.get("configMap", {})
    data = configs.get(cm.get("name", ""), {})
    files = {p.name for p in MODELS.glob("*.json")}
    check(
        mount is not None and not cm.get("items") and set(data) == files,
        f"{where}: the models ConfigMap is mounted at DMLSERVE_MODEL_REPOSITORY ({path})",
    )


def check_compose() -> None:
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    for name, service in compose["services"].items():
        path = service.get("environment", {}).get("DMLSERVE_MODEL_REPOSITORY")
        sources = [
            v.split(":")[0] for v in service.get("volumes", []) if v.split(":")[1:2] == [path]
        ]
        check(sources == ["./deploy/models"], f"compose {name}: deploy/models mounted at {path}")


def _strict(schema: Any) -> Any:
    """A CRD schema refusing unknown fields (as `kubectl apply` with strict field validation)."""
    if isinstance(schema, dict):
        schema = {k: _strict(v) for k, v in schema.items()}
        preserve = schema.get("x-kubernetes-preserve-unknown-fields")
        if "properties" in schema and "additionalProperties" not in schema and not preserve:
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        schema = [_strict(v) for v in schema]
    return schema


def check_kserve() -> None:
    import jsonschema

    schemas = {
        ("serving.kserve.io/v1alpha1", "ServingRuntime"): "kserve-servingruntime-v1alpha1",
        ("serving.kserve.io/v1beta1", "InferenceService"): "kserve-inferenceservice-v1beta1",
    }
    docs = load([str(p) for p in sorted((REPO / "deploy/kserve").glob("*.yaml"))])
    by_kind = {d["kind"]: d for d in docs}
    for doc in docs:
        name = schemas.get((doc["apiVersion"], doc["kind"]))
        if name is None:
            check(False, f"deploy/kserve: no schema for {doc['apiVersion']} {doc['kind']}")
            continue
        raw = gzip.decompress((REPO / "deploy/schemas" / f"{name}.json.gz").read_bytes())
        validator = jsonschema.Draft7Validator(_strict(json.loads(raw)))
        errors = [
            f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(doc)
        ]
        for error in errors:
            check(False, f"{doc['kind']} {doc['metadata']['name']}: {error}")
        check(not errors, f"{doc['kind']} {doc['metadata']['name']} against KServe's CRD schema")
    runtime, isvc = by_kind["ServingRuntime"], by_kind["InferenceService"]
    model = isvc["spec"]["predictor"]["model"]
    formats = {(f["name"], f.get("version")) for f in runtime["spec"]["supportedModelFormats"]}
    check(
        model["runtime"] == runtime["metadata"]["name"]
        and (model["modelFormat"]["name"], model["modelFormat"].get("version")) in formats
        and model.get("protocolVersion") in runtime["spec"]["protocolVersions"],
        "InferenceService names the runtime, a model format and a protocol it serves",
    )
    container = runtime["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    port = container["ports"][0]["containerPort"]
    check(
        env.get("DMLSERVE_MODEL_REPOSITORY") == "/mnt/models"
        and env.get("DMLSERVE_PORT") == str(port)
        and container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready",
        "ServingRuntime: serves /mnt/models (KServe's download) on its declared port, ready "
        "when /v2/health/ready is",
    )


def main(paths: list[str]) -> int:
    docs = load(paths)
    configs = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    check_settings(docs)
    for dep in (d for d in docs if d["kind"] == "Deployment"):
        check_deployment(dep, configs)
    check_metrics(docs)
    check_models()
    check_compose()
    check_kserve()
    sys.stdout.write(f"{len(failures)} failed\n" if failures else "all invariants hold\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
