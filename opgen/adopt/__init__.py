"""What `opgen import` is made of: the C++ and Python readers, and how kernels are kept.

The library call is `opgen.adopt.importer.import_extension`.
"""
