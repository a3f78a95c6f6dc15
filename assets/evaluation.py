"""Per KB × strategy version: retrieval evaluation on the KB's own questions.

Runs after the version's search index; scores search with the KB's ``questions.jsonl``
(character-level recall, precision, IoU of child and parent spans). A KB without
questions materializes with ``questions: 0`` and nothing else.
"""

from typing import Any

from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from assets.conventions import OWNERS, PYTHON
from assets.partitions import kb_version_partitions, split_key
from corpus_pipeline.retrieval.evaluation import evaluate_partition
from resources import CorpusResource


@asset(
    partitions_def=kb_version_partitions,
    group_name="evaluation",
    code_version="1",
    deps=["search_index"],
    kinds=PYTHON,
    owners=OWNERS,
)
def retrieval_eval(context: AssetExecutionContext, corpus: CorpusResource) -> MaterializeResult[Any]:
    """Recall / precision / IoU of search at this version on ``<kb>/questions.jsonl``."""
    kb_name, version = split_key(context.partition_key)
    report = evaluate_partition(corpus.layout, corpus.kb_at_version(kb_name, version), version)
    if report is None:
        return MaterializeResult(
            metadata={
                "dagster/row_count": MetadataValue.int(0),
                "questions": 0,
                "skipped": "the KB has no questions.jsonl",
            }
        )
    report_file = corpus.layout.eval_report_file(kb_name, version)
    return MaterializeResult(
        metadata={
            "dagster/row_count": MetadataValue.int(len(report.questions)),  # one row a question
            **report.summary(),
            "notes": MetadataValue.json(report.notes),
            "report": MetadataValue.path(str(report_file)),
        }
    )
