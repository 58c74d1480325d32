"""Analysis: the paper's section 3 (token confidence) and its tables and figures.

Pure computations (`windows`, `confidence`, `tables`) are separate from file writing
(`confidence_report`, `report`, `plots`). Analysis reads results: the model side of the
confidence analysis (`cuset.experiment.scoring`) and the sweep (`cuset.experiment.sweep`)
sit in the orchestration layer above it.
"""
