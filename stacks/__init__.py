"""stacks package."""
