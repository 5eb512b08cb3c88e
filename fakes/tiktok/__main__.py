"""`python -m fakes.tiktok`."""

from fakes.tiktok.cli import main

main()
