"""Runs on the Slurm controller: power-save plugin (resume, suspend, resume-fail), render, instance cache.

Imports nothing from CDK. Pure planning lives apart from the EC2 and Slurm adapters (functional core, imperative shell).
"""
