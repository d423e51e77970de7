"""Emulated machines: the controller and instance views, their boots (the exact user data), the runner."""
