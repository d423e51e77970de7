"""Render a cluster config into what Slurm and the plugin read: cluster.py (the fragments, `render_cluster`), base.py
(the base slurm.conf and cgroup.conf), nodes.py (NodeName lines, gres.conf), dbd.py (slurmdbd.conf), manifest.py (the
runtime manifest), overrides.py (the local cloud's ES_RENDER_OVERRIDES). All pure but the CLIs.
"""
