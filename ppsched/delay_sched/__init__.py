"""Delay scheduling: trims decode microbatches to efficient sizes. Pure policy code."""
