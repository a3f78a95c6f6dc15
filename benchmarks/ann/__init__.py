"""ANN benchmark: IVF_PQ vs flat latency at 1M children, recall@10 against exact search."""
