"""Generated numba kernels (see galinear._generated)."""
