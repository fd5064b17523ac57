"""Plots and widgets for the notebooks: one module per picture family, each tested in
tests/viz/test_viz_*.py. They draw what they are given: a stored benchmark result is read by
pagedkv_lib.studies.results, a study's figures are computed in pagedkv_lib.studies."""
