"""The metrics exporter on the controller: Prometheus metrics of Slurm and the plugin, and a CloudWatch publisher."""

# The port the stacks give the exporter (the one OpenTelemetry/Prometheus exporters conventionally take); the
# controllers' security group admits it from the cluster's Monitoring security group only (stacks/network.py).
EXPORTER_PORT = 9464
