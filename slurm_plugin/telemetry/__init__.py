"""What the plugin records for operators: the event log (events.py) the metrics exporter, the cost report and the
timeline picture read."""
