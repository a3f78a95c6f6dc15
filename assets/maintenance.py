"""Search-table maintenance, scheduled rather than paid by every index run.

An index run writes only the changed documents' rows and rewrites only the table files that
held deleted rows (``corpus_pipeline.store.lance.write_search_table``); what it leaves for
later is small fragments and delta segments of the full-text index (merged by a write only
past ``FTS_MAX_SEGMENTS``). The ``maintain_search_tables`` job, one run per KB partition
(queued one per KB like every run of that KB), does that work for every built version of
the KB: ``corpus_pipeline.indexing.publish.maintain_kb``. The weekly schedule requests it
for every KB; like the nightly re-index it starts stopped.
"""

from dagster import (
    DefaultScheduleStatus,
    OpExecutionContext,
    RunRequest,
    ScheduleEvaluationContext,
    SkipReason,
    job,
    op,
    schedule,
)

from assets.health import HOST_TAG, KB_TAG, this_host
from assets.partitions import kb_partitions
from corpus_pipeline.indexing.publish import maintain_kb
from corpus_pipeline.store.locks import KBBusyError
from resources import CorpusResource


@op(description="Merge small fragments and full-text index segments of a KB's search tables; drop old versions.")
def maintain_kb_tables(context: OpExecutionContext, corpus: CorpusResource) -> None:
    kb = context.partition_key
    try:
        done = maintain_kb(corpus.layout, kb)
    except KBBusyError as exc:  # an index of this KB is writing: it is the newer work, try next time
        context.log.warning(f"{kb}: skipped, {exc}")
        return
    for version, what in done.items():
        context.log.info(f"{kb}|{version}: {what}")
    if not done:
        context.log.info(f"{kb}: no search table built yet")


@job(partitions_def=kb_partitions, description="Maintain the search tables of one knowledge base.")
def maintain_search_tables() -> None:
    maintain_kb_tables()


@schedule(
    job=maintain_search_tables,
    cron_schedule="0 3 * * 0",
    execution_timezone="UTC",
    default_status=DefaultScheduleStatus.STOPPED,
    description="Weekly search-table maintenance of every KB (compaction, index segments, old versions).",
)
def weekly_maintenance(context: ScheduleEvaluationContext) -> list[RunRequest] | SkipReason:
    kbs = context.instance.get_dynamic_partitions("kb")
    if not kbs:
        return SkipReason("no knowledge base registered yet")
    date = context.scheduled_execution_time.strftime("%Y-%m-%d")
    return [
        RunRequest(
            partition_key=kb,
            run_key=f"maintain|{kb}|{date}",
            tags={"corpus/trigger": "maintenance", KB_TAG: kb, HOST_TAG: this_host()},
        )
        for kb in kbs
    ]
