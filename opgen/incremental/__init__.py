"""What lets a run skip work: the generate cache, its inputs, the settled plan, template bytecode."""
