"""The two partitionings: by knowledge base, and by knowledge base × strategy version.

Parsing depends only on a KB's documents, so it is partitioned by ``kb``. Everything
chunking shapes is partitioned by ``kb × strategy_version`` (multi-partition keys read
``"<kb>|<strategy_version>"``). Both dimensions are dynamic: ``corpus index`` and the
sensor add keys. Dagster shows the full cross product; only the pairs registered under
``warehouse/versions/<kb>/`` are real, and materializing another pair fails with a message
that lists the KB's versions.
"""

import warnings

from dagster import (
    DynamicPartitionsDefinition,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    MultiToSingleDimensionPartitionMapping,
)

kb_partitions = DynamicPartitionsDefinition(name="kb")
strategy_version_partitions = DynamicPartitionsDefinition(name="strategy_version")
kb_version_partitions = MultiPartitionsDefinition(
    {"kb": kb_partitions, "strategy_version": strategy_version_partitions}
)
# A kb × version partition reads the kb partition of its upstream parsing assets.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # BetaWarning: the mapping is stable enough for one dimension
    by_kb = MultiToSingleDimensionPartitionMapping(partition_dimension_name="kb")


def kb_version_key(kb: str, version: str) -> MultiPartitionKey:
    return MultiPartitionKey({"kb": kb, "strategy_version": version})


def split_key(key: MultiPartitionKey | str) -> tuple[str, str]:
    """(kb, strategy_version) of a partition key, or of its string form ``kb|version``
    (what an op inside a graph-backed asset is typed to get)."""
    if isinstance(key, MultiPartitionKey):
        dims = key.keys_by_dimension
        return dims["kb"], dims["strategy_version"]
    kb, sep, version = key.partition("|")
    if not sep:
        raise ValueError(f"{key!r} is not a kb|strategy_version partition key")
    return kb, version
