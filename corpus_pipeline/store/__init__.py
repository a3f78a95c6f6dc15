"""Storage: Parquet partitions (atomic) and the LanceDB search tables."""
