# Two commands matter: `make demo` and `make test`. Both install what they need first (scripts/setup.sh).
SHELL := /bin/bash
PY := .venv/bin/python
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
# No CDK CLI telemetry: tests and the demo talk only to 127.0.0.0/8.
export CDK_DISABLE_CLI_TELEMETRY := true
export PATH := $(CURDIR)/.venv/bin:$(CURDIR)/node_modules/.bin:$(PATH)
# Bytecode caches (git-ignored __pycache__) even where the environment says PYTHONDONTWRITEBYTECODE (CI's does): the
# suite starts hundreds of Python processes, and without them each one compiles the project's modules again and each
# pytest worker rewrites and compiles every test module again (collecting the suite: 15.6 CPU-seconds, 9.4 cached).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup demo test lint typecheck unit bench docs clean

setup:
	@scripts/setup.sh

demo: setup
	@$(PY) -m elastic_slurm.demo

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check cluster_config slurm_plugin elastic_slurm stacks lambdas localcloud tests bench app.py

typecheck: setup
	.venv/bin/mypy cluster_config slurm_plugin elastic_slurm stacks lambdas localcloud app.py

# setup, lint, typecheck and pytest (scripts/test.sh); on a machine without the Slurm roots, their build overlaps
# lint, mypy and the tests that need no root. The suite runs as two pytest runs side by side (--root-tests): the tests
# that run Slurm (each e2e file starts its own local cloud: own state dir, ports claimed across processes,
# localcloud/port_claims.py) in 6 workers, longest file first — they mostly wait on Slurm's timers (4 workers alone:
# ~115 % CPU) — and the CPU-bound rest (synth, cfn-lint, units) in 2 workers. One test file per worker at a time
# (--dist loadfile). Fresh clones on one 2-core machine, empty caches: 19.7, 21.1, 21.6, 23.2 and 25.6 min (apt
# packages installed), 23.6 (apt packages too); 21.9 min at 0fd1f91 (2,152 CPU-seconds); 15.8-20.8 min from
# 4082d8f to 693c7a9 and 19.1 min at de078a7 (26.05.3 built from SchedMD's tarball each time). The run is CPU-bound
# (/proc/stat: both cores busy from minute 2 on; process accounting), and the machine's own speed drifts: the Slurm
# build's same 853 compiler runs cost 166-171 CPU-seconds in the 21 min runs, 192 in the 21.9 min one and 208-223 in
# the 25-28 min ones. At 0fd1f91 the same work costs ~12 % less CPU than at 2f72268 (1,865 vs 2,132 CPU-seconds
# scaled by the compiler runs' cost): controllers start no AWS CLI for their config reads, emulated AWS servers fork
# from a zygote, the Slurm part imports only the modules that can hold its tests.
test:
	@scripts/test.sh

unit: setup
	$(PY) -m pytest -q tests/unit

# The plugin against the emulated AWS, cold starts and a 10,000-node slurmctld in the local cloud, EC2's rate limits
# simulated: each writes its JSON and plots to bench/results/ (bench/README.md)
bench: setup
	$(PY) -m bench.run
	$(PY) -m bench.cold_start
	$(PY) -m bench.scale_10k
	$(PY) -m bench.ec2_sim

docs: setup
	$(PY) -m elastic_slurm.docs_gen > docs/configuration.md
	$(PY) -m elastic_slurm.update_docs --write
	$(PY) -m elastic_slurm.dashboards.grafana --write

clean:
	rm -rf cdk.out .pytest_cache .mypy_cache .ruff_cache
