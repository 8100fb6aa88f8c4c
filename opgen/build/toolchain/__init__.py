"""What `opgen build` compiles with: the CUDA toolkit and its archs (cuda.py), what becomes of the
CUDA sources (modes.py) and how the optional pybind module is linked (pybind.py)."""
