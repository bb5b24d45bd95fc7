"""Drivers and helpers for the rival frameworks.

Drivers (``*_driver.py``) run as scripts inside a framework's own pinned env and may
import that framework; nothing here is imported by the harness except ``settings``.
"""
