"""Plots and widgets for the notebooks: one module per picture family, each tested in
tests/viz/test_viz_*.py."""
