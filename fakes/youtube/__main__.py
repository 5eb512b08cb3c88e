"""`python -m fakes.youtube`."""

from fakes.youtube.cli import main

main()
