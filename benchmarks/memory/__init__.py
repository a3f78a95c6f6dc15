"""The memory benchmark: what an open searcher holds as its KB grows, before and after."""
