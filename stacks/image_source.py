"""What of this repository the image component installs (pure, no CDK): the elastic-slurm package and the assets
zip, read by the images stack (the SourceS3Uri and AssetsS3Uri assets) and by the local cloud's image build
(localcloud.image.image_root), so both install the same files.

The build instance runs `pip install <dir>` into /opt/elastic-slurm/venv. This allow-list (staged by
`stacks.project.stage_project_source`) keeps localcloud/, tests/, stacks/, .venv/, node_modules/, cdk.out/, .git/
and anything added later out of the AMI unless listed here; LICENSE is there because pyproject.toml's
`license-files` names it.
"""

from __future__ import annotations

PROJECT_SOURCE = ("pyproject.toml", "requirements.txt", "LICENSE", "cluster_config", "elastic_slurm", "slurm_plugin")
# assets/ travels to the build instance as a zip (bootstrap, health checks, units, image-build steps) less these
ASSETS_NOT_SHIPPED = ("imagebuilder",)  # the component YAMLs themselves
