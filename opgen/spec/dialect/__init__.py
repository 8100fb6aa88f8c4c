"""PyTorch's operator schema language, read and printed without importing torch.

`parser.parse` reads a schema as torch does (Note [Schema model] in
`types.py`), `rules.schema_problems` says what torch would then refuse or
break on, and `printer.format_schema` writes the schema opgen registers.
"""
