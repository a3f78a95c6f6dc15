"""Lineage and stats through the ``corpus`` CLI."""
