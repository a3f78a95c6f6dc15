"""The Dagster code location: ``workspace.yaml`` loads ``defs`` from here."""

from dagster import Definitions

from assets.chunks import child_chunks, chunk_embeddings, parent_blocks, search_index
from assets.documents import documents, image_descriptions, parsed_blocks
from assets.jobs import index_version_job, parse_kb_job
from resources import CorpusResource, PartitionedParquetIOManager

all_assets = [documents, parsed_blocks, image_descriptions, parent_blocks, child_chunks, chunk_embeddings, search_index]


def build_definitions(home: str = "") -> Definitions:
    """Definitions over one CORPUS_HOME (empty: the environment's)."""
    warehouse = str((__import__("pathlib").Path(home) / "warehouse").resolve()) if home else ""
    return Definitions(
        assets=all_assets,
        jobs=[parse_kb_job, index_version_job],
        resources={
            "corpus": CorpusResource(home=home),
            "io_manager": PartitionedParquetIOManager(warehouse=warehouse),
        },
    )


defs = build_definitions()
