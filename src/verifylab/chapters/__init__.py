"""One module per chapter: its parameters (pydantic), the tables, figures and findings it shows,
and ``live`` for the experiments it runs on a GPU box. Notebooks call these and nothing else."""
