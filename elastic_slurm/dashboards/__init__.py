"""Grafana dashboards over the metrics exporter: definitions.py says what they show, grafana.py writes the JSON
files in assets/dashboards/."""
