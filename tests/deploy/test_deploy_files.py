"""The deployment files in deploy/, checked as far as this machine can without Docker,
Kubernetes or Helm (CI starts none of them):

- docker-compose.yaml: validated against the Compose Specification's JSON schema (the copy
  that the check-jsonschema package ships), then what the schema cannot know: every service
  has an image or a build whose Dockerfile exists, depends_on and volumes name things that
  are defined, every environment variable is one the code (or Dagster) reads, the services
  reach each other by their names and ports, and the commands name files the image has.
- Dockerfile: the base image, the apt packages of scripts/system-deps.sh's OCR set, the torch
  pin of pyproject.toml, COPY sources that exist, extras that pyproject.toml defines.
- deploy/dagster.yaml: validated by Dagster's own instance-config schema; the worker's
  celery-worker.yaml by dagster-celery's executor config schema; workspace.yaml as a Dagster
  workspace (grpc_server) that points at the compose service.
- helm/values.yaml: NOT validated against the dagster chart's values.schema.json (the chart
  and its schema are not on PyPI; no helm here). Checked instead: top-level keys and the run
  launcher's keys are ones the chart's schema defines (listed below from that schema), the run
  launcher's type and config agree, the user code deployment loads our code location, its
  env is what the code reads, volumes and mounts agree with each other and with the PVC
  manifest, and the run queue's limits are the instance's (one run per KB).
"""

from __future__ import annotations

import importlib
import importlib.resources
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from assets import executors

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
SOURCES = [REPO / "corpus_pipeline", REPO / "assets", REPO / "resources"]
# variables that Dagster, its libraries or the images read (not our source)
DAGSTER_VARS = {
    "DAGSTER_HOME", "DAGSTER_PG_HOST", "DAGSTER_PG_PORT", "DAGSTER_PG_USER", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_DB",
}  # fmt: skip
LIBRARY_VARS = {"OPENAI_API_KEY", "HF_HUB_OFFLINE", "DO_NOT_TRACK"}  # openai / huggingface / unstructured
# The dagster chart's values schema (helm/dagster/schema in Dagster's repository, 1.13):
# its top-level keys, and the keys of runLauncher.config.k8sRunLauncher.
CHART_TOP_KEYS = {
    "dagsterWebserver", "dagster-user-deployments", "postgresql", "generatePostgresqlPasswordSecret",
    "generateCeleryConfigSecret", "rabbitmq", "redis", "flower", "ingress", "imagePullSecrets",
    "computeLogManager", "scheduler", "runLauncher", "pythonLogs", "dagsterDaemon", "busybox", "migrate",
    "telemetry", "serviceAccount", "global", "retention", "concurrency", "additionalInstanceConfig",
}  # fmt: skip
K8S_RUN_LAUNCHER_KEYS = {
    "image", "imagePullPolicy", "jobNamespace", "loadInclusterConfig", "kubeconfigFile", "envConfigMaps",
    "envSecrets", "envVars", "volumeMounts", "volumes", "labels", "failPodOnRunFailure", "resources",
    "schedulerName", "securityContext", "runK8sConfig",
}  # fmt: skip
RUN_LAUNCHER_CONFIG = {
    "K8sRunLauncher": "k8sRunLauncher", "CeleryK8sRunLauncher": "celeryK8sRunLauncher",
    "CustomRunLauncher": "customRunLauncher",
}  # fmt: skip
USER_DEPLOYMENT_KEYS = {
    "name", "image", "dagsterApiGrpcArgs", "codeServerArgs", "includeConfigInLaunchedRuns", "port", "env",
    "envConfigMaps", "envSecrets", "annotations", "nodeSelector", "affinity", "tolerations", "podSecurityContext",
    "securityContext", "resources", "livenessProbe", "readinessProbe", "startupProbe", "labels", "volumeMounts",
    "volumes", "schedulerName",
}  # fmt: skip


def _mount(volume: str) -> tuple[str, str]:
    """(source, target) of a short-syntax volume (``${VAR:-default}`` as the source is fine)."""
    source, target = re.sub(r"\$\{[^}]*\}", "$VAR", volume).split(":")[:2]
    return source, target


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return _load(DEPLOY / "docker-compose.yaml")  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    return _load(DEPLOY / "helm" / "values.yaml")  # type: ignore[no-any-return]


def _source_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for d in SOURCES for p in d.rglob("*.py"))


def _read_by_code(name: str, source: str) -> bool:
    return name in DAGSTER_VARS or name in LIBRARY_VARS or f'"{name}"' in source


def _instance_limits(path: Path) -> list[dict[str, Any]]:
    return _load(path)["concurrency"]["runs"]["tag_concurrency_limits"]  # type: ignore[no-any-return]


def _code_location(args: list[str]) -> None:
    """``-m MODULE -a ATTR`` (as dagster code-server / api grpc take them) loads our Definitions."""
    from dagster import Definitions

    module, attr = args[args.index("-m") + 1], args[args.index("-a") + 1]
    assert isinstance(getattr(importlib.import_module(module), attr), Definitions)


# --- docker-compose.yaml -------------------------------------------------------------------


def test_compose_file_is_valid_against_the_compose_specification_schema(compose):
    import jsonschema

    schema_file = importlib.resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(compose), key=lambda e: list(e.path))
    assert not errors, [f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors]
    # and the schema does catch a mistake (so the check above is not vacuous)
    broken = {
        **compose,
        "services": {**compose["services"], "redis": {**compose["services"]["redis"], "ports": [{"bogus": 1}]}},
    }
    assert list(validator.iter_errors(broken))


def test_compose_has_the_services_a_deployment_needs_and_their_references_resolve(compose):
    services = compose["services"]
    assert {"postgres", "redis", "webserver", "daemon", "codelocation", "worker"} <= set(services)
    declared_volumes = set(compose.get("volumes") or {})
    for name, svc in services.items():
        assert "image" in svc or "build" in svc, name
        if "build" in svc:
            context = (DEPLOY / svc["build"]["context"]).resolve()
            assert (context / svc["build"]["dockerfile"]).is_file(), name
        for dep in svc.get("depends_on") or {}:
            assert dep in services, f"{name} depends on {dep}, which is no service"
        for vol in svc.get("volumes") or []:
            source = _mount(vol)[0]
            if not source.startswith(("/", ".", "$")):
                assert source in declared_volumes, f"{name} mounts volume {source}, which is not declared"
    # the services that run our code share CORPUS_HOME and the model cache
    mounts = {n: {_mount(v)[1] for v in services[n]["volumes"]} for n in ("codelocation", "worker")}
    assert mounts["codelocation"] == mounts["worker"]
    home = services["worker"]["environment"]["CORPUS_HOME"]
    assert home in mounts["worker"]
    assert services["webserver"]["ports"] == ["3000:3000"]


def test_compose_environment_is_what_the_code_reads_and_points_at_the_services(compose):
    source = _source_text()
    services = compose["services"]
    for name in ("codelocation", "webserver", "daemon", "worker"):
        env = services[name]["environment"]
        for var in env:
            assert _read_by_code(var, source), f"{name}: {var} is read by nothing"
        assert env["DAGSTER_PG_HOST"] == "postgres"
        pg = services["postgres"]["environment"]
        assert (env["DAGSTER_PG_USER"], env["DAGSTER_PG_DB"], env["DAGSTER_PG_PASSWORD"]) == (
            pg["POSTGRES_USER"], pg["POSTGRES_DB"], pg["POSTGRES_PASSWORD"],
        )  # fmt: skip
    for name in ("codelocation", "worker"):  # the executor and the workers: one broker
        env = services[name]["environment"]
        assert executors.executor_name(env) == "celery"
        for var in (executors.BROKER_ENV, executors.BACKEND_ENV):
            assert env[var].startswith("redis://redis:6379/"), var
    assert services["codelocation"]["environment"] == services["worker"]["environment"]


def test_compose_commands_start_our_code_location_and_workers(compose):
    services = compose["services"]
    code = services["codelocation"]["command"]
    assert code[:3] == ["dagster", "code-server", "start"]
    _code_location(code)
    port = int(code[code.index("-p") + 1])
    workspace = _load(DEPLOY / "workspace.yaml")
    (grpc,) = [entry["grpc_server"] for entry in workspace["load_from"]]
    assert (grpc["host"], grpc["port"]) == ("codelocation", port)
    assert grpc["location_name"] == code[code.index("--location-name") + 1] == "corpus_pipeline"
    image_files = _image_files()
    for name in ("webserver", "daemon"):
        cmd = services[name]["command"]
        assert cmd[cmd.index("-w") + 1] in image_files, name
    worker = services["worker"]["command"]
    assert worker[:3] == ["dagster-celery", "worker", "start"]
    assert worker[worker.index("-A") + 1] == "dagster_celery.app"
    assert worker[worker.index("-y") + 1] in image_files


def test_the_workspace_is_a_valid_dagster_workspace():
    from dagster._core.workspace.config_schema import ensure_workspace_config

    ensure_workspace_config(_load(DEPLOY / "workspace.yaml"), str(DEPLOY / "workspace.yaml"))


def test_the_worker_config_is_valid_for_dagster_celery_and_matches_the_executor(monkeypatch):
    from dagster_celery.cli import get_validated_config

    monkeypatch.setenv(executors.BROKER_ENV, "redis://redis:6379/0")
    monkeypatch.setenv(executors.BACKEND_ENV, "redis://redis:6379/1")
    cfg = get_validated_config(str(DEPLOY / "celery-worker.yaml"))
    assert (cfg["broker"], cfg["backend"]) == ("redis://redis:6379/0", "redis://redis:6379/1")
    # the executor reads the same two variables
    assert executors.celery_config(dict(__import__("os").environ)) == {
        "broker": {"env": executors.BROKER_ENV}, "backend": {"env": executors.BACKEND_ENV},
    }  # fmt: skip


def test_the_containers_instance_config_is_valid_and_keeps_one_run_per_kb(tmp_path, monkeypatch):
    from dagster._core.instance.config import dagster_instance_config

    for var in ("DAGSTER_PG_HOST", "DAGSTER_PG_PORT", "DAGSTER_PG_USER", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_DB"):
        monkeypatch.setenv(var, "5432" if var.endswith("PORT") else "x")
    (tmp_path / "dagster.yaml").write_text((DEPLOY / "dagster.yaml").read_text(encoding="utf-8"))
    cfg, _ = dagster_instance_config(str(tmp_path))
    assert "postgres" in cfg["storage"]
    for key in ("run_launcher", "run_coordinator"):
        cls = getattr(importlib.import_module(cfg[key]["module"]), cfg[key]["class"])
        assert isinstance(cls, type), key
    assert _instance_limits(DEPLOY / "dagster.yaml") == _instance_limits(REPO / "dagster.postgres.yaml")


# --- Dockerfile ----------------------------------------------------------------------------


def _dockerfile() -> list[tuple[str, str]]:
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def _image_files() -> set[str]:
    """Paths inside the image that COPY puts there (files, and files of copied folders)."""
    workdir, files = "/", set()
    for op, rest in _dockerfile():
        if op == "WORKDIR":
            workdir = rest
        elif op == "COPY":
            *srcs, dest = shlex.split(rest)
            base = dest if dest.startswith("/") else f"{workdir.rstrip('/')}/{dest.removeprefix('./')}"
            for src in srcs:
                if len(srcs) == 1 and not dest.endswith("/"):
                    files.add(base)
                else:
                    files.add(f"{base.rstrip('/')}/{Path(src).name}")
    return files


def test_the_dockerfile_builds_what_the_project_installs():
    steps = _dockerfile()
    assert steps[0] == ("FROM", "python:3.11-slim")
    run = " ".join(rest for op, rest in steps if op == "RUN")
    ocr = re.findall(r"need\+=\((tesseract[\w-]*)\)", (REPO / "scripts" / "system-deps.sh").read_text())
    assert ocr and all(p in run.split() for p in ocr), ocr
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    torch = re.search(r'"(torch==[^"]+)"', pyproject)
    assert torch and torch.group(1) in run
    extras = re.search(r'pip install [^"]*"\.\[([\w,]+)\]"', run)
    assert extras, run
    for extra in extras.group(1).split(","):
        assert re.search(rf"^{extra} = \[", pyproject, re.M), f"pyproject.toml has no extra {extra}"
    for op, rest in steps:
        if op == "COPY":
            for src in shlex.split(rest)[:-1]:
                assert (REPO / src).exists(), f"COPY {src}: not in the repository"
    assert {
        "/opt/dagster/home/dagster.yaml",
        "/opt/corpus/deploy/workspace.yaml",
        "/opt/corpus/deploy/celery-worker.yaml",
    } <= _image_files()
    env = " ".join(rest for op, rest in steps if op == "ENV")
    assert "CORPUS_HOME=/corpus" in env and "DAGSTER_HOME=/opt/dagster/home" in env
    cmd = json.loads(next(rest for op, rest in steps if op == "CMD"))
    _code_location(cmd)
    # the build context is the repository: the virtualenv and the outputs stay out of it
    ignored = set((DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").split())
    assert {".venv", "data", ".git"} <= ignored


# --- helm/values.yaml ----------------------------------------------------------------------


def test_helm_values_use_only_keys_the_dagster_chart_defines(values):
    assert set(values) <= CHART_TOP_KEYS, set(values) - CHART_TOP_KEYS
    launcher = values["runLauncher"]
    assert launcher["type"] in RUN_LAUNCHER_CONFIG
    assert set(launcher["config"]) == {RUN_LAUNCHER_CONFIG[launcher["type"]]}
    if launcher["type"] == "K8sRunLauncher":
        cfg = launcher["config"]["k8sRunLauncher"]
        assert set(cfg) <= K8S_RUN_LAUNCHER_KEYS, set(cfg) - K8S_RUN_LAUNCHER_KEYS
        assert isinstance(cfg["loadInclusterConfig"], bool)
    assert values["postgresql"]["enabled"] or values["postgresql"]["postgresqlHost"]
    for deployment in values["dagster-user-deployments"]["deployments"]:
        assert set(deployment) <= USER_DEPLOYMENT_KEYS, set(deployment) - USER_DEPLOYMENT_KEYS
        assert {"name", "image", "port"} <= set(deployment)
        assert {"repository", "tag"} <= set(deployment["image"])


def test_helm_user_deployment_runs_our_code_location_with_the_k8s_executor_and_a_shared_home(values):
    source = _source_text()
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    assert values["dagster-user-deployments"]["enabled"] is True
    _code_location(deployment["dagsterApiGrpcArgs"])
    env = {e["name"]: e["value"] for e in deployment["env"]}
    for var in env:
        assert _read_by_code(var, source), f"{var} is read by nothing"
    assert executors.executor_name(env) == "k8s"
    executors.executor_from_env(env)  # dagster-k8s is installed (dev) and the settings are valid
    assert deployment["includeConfigInLaunchedRuns"]["enabled"] is True
    pvc = _load(DEPLOY / "helm" / "corpus-home-pvc.yaml")
    assert pvc["kind"] == "PersistentVolumeClaim" and pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    for where in (deployment, launcher):
        volumes = {v["name"]: v for v in where["volumes"]}
        for mount in where["volumeMounts"]:
            assert mount["name"] in volumes
        home = volumes["corpus-home"]["persistentVolumeClaim"]["claimName"]
        assert home == pvc["metadata"]["name"]
        assert {m["mountPath"] for m in where["volumeMounts"] if m["name"] == "corpus-home"} == {env["CORPUS_HOME"]}


def test_helm_run_queue_keeps_one_run_per_kb_like_the_instance(values):
    coordinator = values["dagsterDaemon"]["runCoordinator"]
    assert coordinator["enabled"] is True and coordinator["type"] == "QueuedRunCoordinator"
    limits = coordinator["config"]["queuedRunCoordinator"]["tagConcurrencyLimits"]
    assert limits == _instance_limits(REPO / "dagster.yaml")


def test_helm_values_name_the_chart_of_our_dagster_version():
    import dagster

    text = (DEPLOY / "helm" / "values.yaml").read_text(encoding="utf-8")
    assert f"--version {dagster.__version__}" in text
