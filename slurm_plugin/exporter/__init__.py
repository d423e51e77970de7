"""The metrics exporter on the controller: Prometheus metrics of Slurm and the plugin, and a CloudWatch publisher."""

# The port the stacks give the exporter (the one OpenTelemetry/Prometheus exporters conventionally take); the cluster's
# node security group lets the cluster's own hosts reach it, nothing else.
EXPORTER_PORT = 9464
