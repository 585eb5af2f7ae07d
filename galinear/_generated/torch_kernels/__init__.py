"""Generated torch kernels (see galinear._generated)."""
