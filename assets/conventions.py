"""What every asset of the code location declares the same way: its owner and its kinds
(the storage icons of the Dagster UI). The standard table metadata is
``resources.metadata``."""

OWNERS = ["team:corpus"]
PARQUET = {"parquet", "python"}  # an asset the Parquet IO manager writes
LANCEDB = {"lancedb", "python"}
PYTHON = {"python"}
