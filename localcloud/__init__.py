"""localcloud package."""
