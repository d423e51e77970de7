"""Accounting: diff.py (desired state from the config, the pure diff against slurmdbd) and sacctmgr.py (the sacctmgr
adapter and `slurm-accounting-apply`).
"""
