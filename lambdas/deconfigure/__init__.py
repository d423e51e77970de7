"""Deconfigure custom resource: on stack delete, clean up what CloudFormation does not own (see handler.py)."""
