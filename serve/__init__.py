"""modelship serve: publish to a Triton model repository, run a local Triton server, and query it."""
