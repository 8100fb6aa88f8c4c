"""`opgen new`: the text of a first spec and project, composed and generated in one run."""
