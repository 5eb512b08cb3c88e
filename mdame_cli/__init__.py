"""The `mdame` command line: the top of the layering, above mdame_core and mdame_assets."""
