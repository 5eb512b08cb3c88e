"""`python -m fakes.instagram`."""

from fakes.instagram.cli import main

main()
