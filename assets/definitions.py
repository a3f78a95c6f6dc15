"""The Dagster code location: ``workspace.yaml`` loads ``defs`` from here."""

from dagster import Definitions

from assets.chunks import child_chunks, chunk_embeddings, parent_blocks, search_index
from assets.documents import documents, image_descriptions, parsed_blocks
from assets.evaluation import retrieval_eval
from assets.executors import executor_from_env
from assets.jobs import index_version_job, parse_kb_job
from assets.maintenance import maintain_search_tables, weekly_maintenance
from assets.sensors import kb_change_sensor, nightly_reindex
from resources import CorpusResource, LLMResource, PartitionedParquetIOManager
from resources.batch_io import BatchIOManager
from resources.env import env_or

all_assets = [
    documents,
    parsed_blocks,
    image_descriptions,
    parent_blocks,
    child_chunks,
    chunk_embeddings,
    search_index,
    retrieval_eval,
]


def build_definitions(home: str = "", executor: str | None = None, workers: int = 0) -> Definitions:
    """Definitions over one CORPUS_HOME (empty: the environment's, as ``EnvVar("CORPUS_HOME")``
    when it is set, so the UI shows where the home comes from; unset: ``./data``).
    ``executor`` (default ``CORPUS_EXECUTOR``) runs the steps of launched runs: see
    ``assets/executors.py``. ``workers``: how many batches a stage is cut into at most
    (0: ``CORPUS_WORKERS``, else 1; see ``corpus_pipeline.indexing.batches``)."""
    home = home or env_or("CORPUS_HOME")
    return Definitions(
        assets=all_assets,
        executor=executor_from_env(name=executor),
        jobs=[parse_kb_job, index_version_job, maintain_search_tables],
        sensors=[kb_change_sensor],
        schedules=[nightly_reindex, weekly_maintenance],
        resources={
            "corpus": CorpusResource(home=home, workers=workers),
            "llm": LLMResource.from_env(),
            "io_manager": PartitionedParquetIOManager(home=home),
            "batch_io_manager": BatchIOManager(home=home),
        },
    )


defs = build_definitions()
