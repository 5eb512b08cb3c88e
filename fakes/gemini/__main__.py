"""`python -m fakes.gemini`."""

from fakes.gemini.cli import main

main()
