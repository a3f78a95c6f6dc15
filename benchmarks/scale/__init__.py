"""The scale benchmark: generated KBs of growing size, indexed serially and with workers."""
