"""Drivers and helpers for the rival frameworks.

Drivers (``*_driver.py``) run as scripts inside a framework's own pinned env and may
import that framework; the harness imports only ``settings`` and ``weights_map`` (which
imports torch only inside the function a driver calls to read a file), and the bundled
trainer ``asrun`` (the settings line every driver prints, standard library at import) and
``common`` (the log lines, and the inference flags, image pool and timing every driver shares).
"""
