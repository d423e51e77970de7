"""The emulated AWS: the moto server and what moto lacks (IAM enforcement, faults, prices, topology)."""
