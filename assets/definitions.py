"""The Dagster code location: ``workspace.yaml`` loads ``defs`` from here."""

from dagster import Definitions

from assets.chunks import child_chunks, chunk_embeddings, parent_blocks, search_index
from assets.documents import documents, image_descriptions, parsed_blocks
from assets.evaluation import retrieval_eval
from assets.jobs import index_version_job, parse_kb_job
from assets.sensors import kb_change_sensor, nightly_reindex
from resources import CorpusResource, LLMResource, PartitionedParquetIOManager
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


def build_definitions(home: str = "") -> Definitions:
    """Definitions over one CORPUS_HOME (empty: the environment's, as ``EnvVar("CORPUS_HOME")``
    when it is set, so the UI shows where the home comes from; unset: ``./data``)."""
    home = home or env_or("CORPUS_HOME")
    return Definitions(
        assets=all_assets,
        jobs=[parse_kb_job, index_version_job],
        sensors=[kb_change_sensor],
        schedules=[nightly_reindex],
        resources={
            "corpus": CorpusResource(home=home),
            "llm": LLMResource.from_env(),
            "io_manager": PartitionedParquetIOManager(home=home),
        },
    )


defs = build_definitions()
