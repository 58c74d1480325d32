"""Data curation: task families, the task factory, and dataset building."""
