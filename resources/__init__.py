"""Dagster resources and the IO manager: thin wrappers over corpus_pipeline's clients."""

from resources.corpus import CorpusResource
from resources.io_manager import PartitionedParquetIOManager
from resources.llm import LLMResource

__all__ = ["CorpusResource", "LLMResource", "PartitionedParquetIOManager"]
