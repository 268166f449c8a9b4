"""The ``posenc`` command line: thin Typer commands over plain functions in posenc/experiments."""
