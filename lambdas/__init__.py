"""lambdas package."""
