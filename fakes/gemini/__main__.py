"""`python -m fakes.gemini`."""

from fakes.gemini import main

main()
