"""Providers: for each stage an interface, a production implementation and an offline one.

The offline providers are real (sample feeds, a rule classifier, a local writer, ffmpeg visuals,
espeak-ng, an outbox channel) and refuse to run in ENV=prod.
"""
