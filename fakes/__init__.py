"""Local protocol servers that speak the real wire protocols of MD-AME's production services.

They serve the tests and `make demo PROVIDERS=fakes`: the real client libraries (google-genai,
edge-tts, httpx) talk to them unchanged on 127.0.0.1, and each can inject the faults the real
services show. They are development tools, never imported by the product packages.
"""
