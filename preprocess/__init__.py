"""modelship preprocess: one image-preprocessing implementation (numpy + Pillow, no torch) used everywhere."""
