"""The change sensor and the nightly schedule: re-index exactly what changed.

The sensor, on each tick, for every KB folder under ``$CORPUS_HOME/kbs``:
- adds its ``kb`` partition when the folder is new, and registers its current
  ``strategy_version`` (adding that partition) when ``kb.yaml`` changed;
- asks ``corpus_pipeline.freshness`` what is stale, and requests the parse run of that KB
  when documents were added, edited or deleted (or parsing settings changed), else the
  version run when the current version was never built or was built from an older parse.
Run keys carry the parse fingerprint, so one change is requested once. A KB whose
``kb.yaml`` is invalid is skipped with a warning naming the error; the others go on.

The nightly schedule re-runs parsing of every KB (cheap: unchanged documents are reused);
the sensor then rebuilds the versions whose inputs changed.
"""

from dagster import (
    AddDynamicPartitionsRequest,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    schedule,
    sensor,
)

from assets.health import HOST_TAG, KB_TAG, repair_dead_runs, this_host
from assets.jobs import index_version_job, parse_kb_job
from assets.partitions import kb_version_key
from corpus_pipeline import freshness, indexing
from corpus_pipeline.errors import ConfigError
from corpus_pipeline.indexing.publish import activate_if_current
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.secrets import mask
from corpus_pipeline.store.locks import holder, is_locked
from corpus_pipeline.store.versions import active_version, register_version
from resources import CorpusResource


@sensor(
    jobs=[parse_kb_job, index_version_job],
    minimum_interval_seconds=60,
    default_status=DefaultSensorStatus.STOPPED,
    description="Index new KBs, changed documents and changed chunking configs, and nothing else.",
)
def kb_change_sensor(context: SensorEvaluationContext, corpus: CorpusResource) -> SensorResult | SkipReason:
    layout = corpus.layout
    instance = context.instance
    # Runs whose process died (kill -9, OOM) hold pool slots and stay STARTED: repair them
    # on every tick, so a daemon-only deployment never wedges (see assets/health.py).
    for line in repair_dead_runs(instance):
        context.log.warning(f"repaired: {line}")
    new_kbs: list[str] = []
    new_versions: list[str] = []
    requests: list[RunRequest] = []
    for name in layout.list_kbs():
        try:
            kb = resolve_kb(layout.kb_dir(name))
        except ConfigError as exc:
            context.log.warning(f"skipping knowledge base {name!r}: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - one KB's folder must not stop the tick for the others
            context.log.error(f"skipping knowledge base {name!r}: {type(exc).__name__}: {mask(str(exc))[:500]}")
            continue
        version = register_version(layout, kb)
        if not instance.has_dynamic_partition("kb", name) and name not in new_kbs:
            new_kbs.append(name)
        if not instance.has_dynamic_partition("strategy_version", version) and version not in new_versions:
            new_versions.append(version)
        fresh = freshness.check(layout, kb, version, indexing.discover_documents(kb).table)
        if fresh.up_to_date and active_version(layout, name) != version:
            # kb.yaml was reverted to a version that is built: serve it, nothing to run
            activate_if_current(layout, name, version)
            context.log.info(f"{name}: activated {version}, already built, which kb.yaml yields again")
        if is_locked(layout, name):  # `corpus index` is writing it: look again next tick
            context.log.info(
                f"{name}: being indexed by another process ({holder(layout, name).get('command')}); skipped"
            )
            continue
        tags = {"corpus/trigger": "sensor", "corpus/reason": fresh.reason, KB_TAG: name, HOST_TAG: this_host()}
        if fresh.parse_needed:
            requests.append(
                RunRequest(
                    job_name=parse_kb_job.name,
                    partition_key=name,
                    tags=tags,
                    run_key=f"parse|{name}|{fresh.parse_fingerprint}",
                )
            )
        elif fresh.index_needed:
            requests.append(
                RunRequest(
                    job_name=index_version_job.name,
                    partition_key=kb_version_key(name, version),
                    tags=tags,
                    run_key=f"index|{name}|{version}|{fresh.parse_fingerprint}",
                )
            )
    if not (requests or new_kbs or new_versions):
        return SkipReason("every knowledge base is up to date")
    partition_requests = []
    if new_kbs:
        partition_requests.append(AddDynamicPartitionsRequest("kb", new_kbs))
    if new_versions:
        partition_requests.append(AddDynamicPartitionsRequest("strategy_version", new_versions))
    return SensorResult(run_requests=requests, dynamic_partitions_requests=partition_requests)


@schedule(
    job=parse_kb_job,
    cron_schedule="0 2 * * *",
    execution_timezone="UTC",
    default_status=DefaultScheduleStatus.STOPPED,
    description="Nightly re-index: re-parse every KB (unchanged documents are reused).",
)
def nightly_reindex(context: ScheduleEvaluationContext) -> list[RunRequest] | SkipReason:
    kbs = context.instance.get_dynamic_partitions("kb")
    if not kbs:
        return SkipReason("no knowledge base registered yet")
    date = context.scheduled_execution_time.strftime("%Y-%m-%d")
    return [
        RunRequest(
            partition_key=kb,
            run_key=f"nightly|{kb}|{date}",
            tags={"corpus/trigger": "nightly", KB_TAG: kb, HOST_TAG: this_host()},
        )
        for kb in kbs
    ]
